#![no_main]
libfuzzer_sys::fuzz_target!(|line: &[u8]| tokscope_core::fuzz::format_line("openai_stream", line));
