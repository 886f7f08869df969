#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tokscope_core::fuzz::format_line("bedrock", data));
