#![no_main]
// The `tokenizers` crate panics on some malformed files; tokscope catches
// those panics and returns an error. libfuzzer-sys's hook would abort at the
// panic before that catch, so the default hook is put back: a panic that
// escapes `PromptTokenizer` still aborts (libfuzzer-sys catches it at the top).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    tokscope_core::fuzz::tokenizer_json(data)
});
