#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| heterarchy_fuzz::trace_readers(data));
