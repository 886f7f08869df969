//! Attribution: who a request ran for and who served it (`requests.user_id`,
//! `team`, `project`, `environment`, `tags`, `key_alias`, `provider`;
//! docs/metrics.md, "Attribution").
//!
//! Each format names the fields of its producer that fill the columns in an
//! [`AttributionKeys`] table (the first field present wins) and reads them
//! with [`from_members`]; the fields stay in `extra` as well, so that a
//! mapping added later can read them from what ingest kept. A user's own
//! fields reach the columns through [`AttributeMap`] (`--attribute
//! team=metadata.cost_center`), applied at ingest over the record's `extra`
//! and at query time by the `extra_field` SQL function over the stored one,
//! both through [`lookup`].

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::record::Attribution;

named_enum! {
    /// An attribution column of `requests`.
    pub enum AttributionColumn as "attribution column" {
        /// The end user (personal data: `--redact` applies).
        UserId = "user_id",
        /// The team.
        Team = "team",
        /// The project, application or service.
        Project = "project",
        /// The deployment environment.
        Environment = "environment",
        /// Tags (`key:value` kept as written).
        Tags = "tags",
        /// The API key's name.
        KeyAlias = "key_alias",
        /// Who served the request.
        Provider = "provider",
    }
}

/// The fields of a format that fill each attribution column, in order of
/// preference (keys of the record's flattened members: `metadata.team` is
/// the member `team` of the object `metadata`, as `extra` keeps it).
#[derive(Debug, Clone, Copy)]
pub struct AttributionKeys {
    /// Fields naming the end user.
    pub user_id: &'static [&'static str],
    /// Fields naming the team.
    pub team: &'static [&'static str],
    /// Fields naming the project.
    pub project: &'static [&'static str],
    /// Fields naming the environment.
    pub environment: &'static [&'static str],
    /// Fields holding tags: a list of strings, an object (`key:value` each),
    /// a string holding a JSON list, or one tag.
    pub tags: &'static [&'static str],
    /// Fields naming the API key.
    pub key_alias: &'static [&'static str],
    /// Fields naming the provider.
    pub provider: &'static [&'static str],
}

impl AttributionKeys {
    /// No field: a format's table starts from it (`..AttributionKeys::NONE`).
    pub const NONE: AttributionKeys = AttributionKeys {
        user_id: &[],
        team: &[],
        project: &[],
        environment: &[],
        tags: &[],
        key_alias: &[],
        provider: &[],
    };
}

/// The attribution of a record whose members (flattened one level, as
/// `extra` keeps them, or an object kept whole, as Langfuse's `metadata`)
/// are `members`, by `keys`, each read by [`lookup`].
pub fn from_members(members: &Map<String, Value>, keys: &AttributionKeys) -> Attribution<'static> {
    let first = |names: &[&str]| names.iter().find_map(|k| lookup(members, k).and_then(scalar)).map(Cow::Owned);
    Attribution {
        user_id: first(keys.user_id),
        team: first(keys.team),
        project: first(keys.project),
        environment: first(keys.environment),
        tags: keys
            .tags
            .iter()
            .find_map(|k| lookup(members, k).map(tags_of).filter(|t| !t.is_empty()))
            .unwrap_or_default(),
        key_alias: first(keys.key_alias),
        // Providers are compared across formats: `OPENAI` (Helicone) is `openai` (LiteLLM, OTel).
        provider: first(keys.provider).map(|p| Cow::Owned(p.to_lowercase())),
    }
}

/// A field's value as an attribution: a non-empty string as is, a number or
/// boolean as written; `None` for null, an empty string, a list or an object.
pub fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// An object's members as `key:value` tags (those whose value is an attribution value).
pub fn member_tags<'m>(members: impl Iterator<Item = (&'m String, &'m Value)>) -> Vec<Cow<'static, str>> {
    members.filter_map(|(k, v)| scalar(v).map(|v| Cow::Owned(format!("{k}:{v}")))).collect()
}

/// A field's value as tags: each non-empty string (or number) of a list, each
/// member of an object as `key:value`, the list a string holds as JSON text,
/// else the one string.
pub fn tags_of(value: &Value) -> Vec<Cow<'static, str>> {
    match value {
        Value::Array(items) => items.iter().filter_map(scalar).map(Cow::Owned).collect(),
        Value::Object(map) => member_tags(map.iter()),
        Value::String(s) if s.trim_start().starts_with('[') => match serde_json::from_str::<Value>(s) {
            Ok(list @ Value::Array(_)) => tags_of(&list),
            _ => vec![Cow::Owned(s.clone())],
        },
        other => scalar(other).map(Cow::Owned).into_iter().collect(),
    }
}

/// The value at `path` in `object`: the member named `path` itself (a
/// flattened key such as `metadata.team`), else a member named by a prefix
/// of it (up to a `.`) holding an object in which the rest is looked up.
pub fn lookup<'v>(object: &'v Map<String, Value>, path: &str) -> Option<&'v Value> {
    if let Some(v) = object.get(path) {
        return Some(v);
    }
    // Longest prefix first: `a.b.c` tries `a.b` then `a`.
    path.char_indices().rev().filter(|(_, c)| *c == '.').find_map(|(i, _)| match object.get(&path[..i]) {
        Some(Value::Object(inner)) => lookup(inner, &path[i + 1..]),
        _ => None,
    })
}

/// One mapping of `--attribute COLUMN=FIELD`: the field (a path into the
/// record's `extra`, as [`lookup`] reads it) that fills the column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeMapping {
    /// The column filled.
    pub column: AttributionColumn,
    /// The field read.
    pub path: String,
}

impl FromStr for AttributeMapping {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let (column, path) = text.split_once('=').ok_or_else(|| {
            config_err!("--attribute takes COLUMN=FIELD (e.g. team=metadata.cost_center), got {text:?}")
        })?;
        let path = path.trim();
        if path.is_empty() {
            return Err(config_err!("--attribute {text:?}: the field after `=` is empty"));
        }
        let column = column.trim().parse().map_err(|e: String| config_err!("--attribute {text:?}: {e}"))?;
        Ok(AttributeMapping { column, path: path.to_string() })
    }
}

impl fmt::Display for AttributeMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.column, self.path)
    }
}

/// The mappings of an ingest (`--attribute`, `[attribution]`): a mapped field
/// present in a record replaces what its format read for that column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributeMap {
    mappings: Vec<AttributeMapping>,
}

impl AttributeMap {
    /// The mappings given; a column mapped twice is an error.
    pub fn new(mappings: Vec<AttributeMapping>) -> Result<Self> {
        for (i, m) in mappings.iter().enumerate() {
            if mappings[..i].iter().any(|o| o.column == m.column) {
                return Err(config_err!("--attribute maps {} twice; give one field per column", m.column));
            }
        }
        Ok(AttributeMap { mappings })
    }

    /// No mapping.
    pub fn is_empty(&self) -> bool {
        self.mappings.is_empty()
    }

    /// The mappings, in the order given.
    pub fn mappings(&self) -> &[AttributeMapping] {
        &self.mappings
    }

    /// `base` with every mapped field that `extra` (a JSON object's text)
    /// holds in place of its column; `None` when nothing changes.
    pub fn apply(&self, base: &Attribution<'_>, extra: Option<&str>) -> Option<Attribution<'static>> {
        if self.mappings.is_empty() {
            return None;
        }
        let object = match serde_json::from_str::<Value>(extra?) {
            Ok(Value::Object(o)) => o,
            _ => return None,
        };
        let mut out: Option<Attribution<'static>> = None;
        for m in &self.mappings {
            let Some(value) = lookup(&object, &m.path) else { continue };
            let target = out.get_or_insert_with(|| base.clone().into_owned());
            let slot = match m.column {
                AttributionColumn::Tags => {
                    let tags = tags_of(value);
                    if !tags.is_empty() {
                        target.tags = tags;
                    }
                    continue;
                }
                AttributionColumn::UserId => &mut target.user_id,
                AttributionColumn::Team => &mut target.team,
                AttributionColumn::Project => &mut target.project,
                AttributionColumn::Environment => &mut target.environment,
                AttributionColumn::KeyAlias => &mut target.key_alias,
                AttributionColumn::Provider => &mut target.provider,
            };
            if let Some(v) = scalar(value) {
                *slot = Some(Cow::Owned(v));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => unreachable!("a test object"),
        }
    }

    #[test]
    fn the_first_present_field_wins_and_empty_ones_say_nothing() {
        const KEYS: AttributionKeys = AttributionKeys {
            user_id: &["end_user", "user"],
            team: &["metadata.team_alias", "team_id"],
            tags: &["request_tags"],
            provider: &["custom_llm_provider"],
            ..AttributionKeys::NONE
        };
        let m = object(json!({"end_user": "", "user": "u-1", "team_id": 7, "request_tags": ["a", "b:c", ""],
                              "custom_llm_provider": "openai"}));
        let a = from_members(&m, &KEYS);
        assert_eq!(a.user_id.as_deref(), Some("u-1"));
        assert_eq!(a.team.as_deref(), Some("7"));
        assert_eq!(a.tags, vec!["a", "b:c"]);
        assert_eq!(a.provider.as_deref(), Some("openai"));
        assert_eq!((a.project, a.environment, a.key_alias), (None, None, None));
    }

    #[test]
    fn keys_read_members_of_objects_kept_whole() {
        // Langfuse keeps an observation's metadata whole: `metadata.ls_provider`
        // is the member of that object; a flattened key of the name comes first.
        const KEYS: AttributionKeys =
            AttributionKeys { tags: &["metadata.tags"], provider: &["metadata.ls_provider"], ..AttributionKeys::NONE };
        let m = object(json!({"metadata": {"ls_provider": "OpenAI", "tags": ["a", "b"]}}));
        let a = from_members(&m, &KEYS);
        assert_eq!(a.provider.as_deref(), Some("openai"));
        assert_eq!(a.tags, vec!["a", "b"]);
        let m = object(json!({"metadata.ls_provider": "bedrock", "metadata": {"ls_provider": "openai"}}));
        assert_eq!(from_members(&m, &KEYS).provider.as_deref(), Some("bedrock"));
    }

    #[test]
    fn tags_from_lists_objects_json_text_and_single_strings() {
        assert_eq!(tags_of(&json!({"team": "search", "tier": 2})), vec!["team:search", "tier:2"]);
        assert_eq!(tags_of(&json!("[\"prod\", \"beta\"]")), vec!["prod", "beta"]);
        assert_eq!(tags_of(&json!("[not json")), vec!["[not json"]);
        assert_eq!(tags_of(&json!("nightly")), vec!["nightly"]);
        assert!(tags_of(&json!(null)).is_empty());
    }

    #[test]
    fn lookup_reads_flattened_keys_and_nested_paths() {
        let o = object(json!({"metadata.spend_logs_metadata": {"cost": {"center": "cc-9"}}, "a": {"b.c": 1}}));
        assert_eq!(lookup(&o, "metadata.spend_logs_metadata.cost.center"), Some(&json!("cc-9")));
        assert_eq!(lookup(&o, "a.b.c"), Some(&json!(1)));
        assert_eq!(lookup(&o, "metadata.missing"), None);
    }

    #[test]
    fn mappings_replace_what_the_format_read_only_where_the_field_is_present() {
        let map = AttributeMap::new(vec!["team=metadata.cost_center".parse().unwrap(), "tags=labels".parse().unwrap()])
            .unwrap();
        let base = Attribution { team: Some("from-format".into()), user_id: Some("u".into()), ..Default::default() };
        let got = map.apply(&base, Some(r#"{"metadata.cost_center":"cc-1","labels":{"env":"prod"}}"#)).unwrap();
        assert_eq!((got.team.as_deref(), got.user_id.as_deref()), (Some("cc-1"), Some("u")));
        assert_eq!(got.tags, vec!["env:prod"]);
        assert_eq!(map.apply(&base, Some(r#"{"other":1}"#)), None);
        assert_eq!(map.apply(&base, None), None);
        assert!("team".parse::<AttributeMapping>().is_err());
        assert!("teams=x".parse::<AttributeMapping>().is_err());
        assert!(AttributeMap::new(vec!["team=a".parse().unwrap(), "team=b".parse().unwrap()]).is_err());
    }
}
