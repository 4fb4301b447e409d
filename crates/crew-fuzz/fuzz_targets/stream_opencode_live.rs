#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crew_fuzz::stream_opencode_live(data));
