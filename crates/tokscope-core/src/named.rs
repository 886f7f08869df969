//! Enums whose values have names: on the command line (`--redact hash`), in
//! configuration files and in stored columns. [`named_enum!`](crate::named_enum)
//! declares the enum with its names once, and derives `NAMES`, `ALL`, `name()`,
//! `Display` and `FromStr` from them, so `--help`, parsing and docs cannot
//! drift apart.

/// Declares an enum whose variants have names.
///
/// ```
/// tokscope_core::named_enum! {
///     /// Output styles.
///     #[derive(Default)]
///     pub enum Style as "style" {
///         /// Plain.
///         #[default]
///         Plain = "plain",
///         /// Fancy.
///         Fancy = "fancy",
///     }
/// }
/// assert_eq!("fancy".parse::<Style>(), Ok(Style::Fancy));
/// assert_eq!(Style::NAMES, &["plain", "fancy"]);
/// assert_eq!(
///     "x".parse::<Style>().unwrap_err(),
///     "unknown style \"x\"; expected one of plain, fancy"
/// );
/// ```
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident as $what:literal {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant ),*
        }

        impl $name {
            /// Every value's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),*];
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The value's name.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    format!("unknown {} {s:?}; expected one of {}", $what, Self::NAMES.join(", "))
                })
            }
        }
    };
}
