//! Replays the kept fuzz corpus (`fuzz/corpus/TARGET/*`: the seeds from the tests, and every
//! input a fuzzing run found worth keeping, crashes among them) through the targets' bodies, so
//! that every test run checks what fuzzing once checked.

use std::io::Read;
use std::path::PathBuf;

#[test]
fn every_kept_input_passes_its_target() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, target) in heterarchy_fuzz::TARGETS {
        let folder = corpus.join(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .map(|entry| entry.expect("a readable corpus folder").path())
            .collect();
        inputs.sort();
        assert!(
            !inputs.is_empty(),
            "{name}: no corpus in {}",
            folder.display()
        );
        for input in &inputs {
            let bytes = std::fs::read(input).expect("a readable corpus file");
            let outcome = std::panic::catch_unwind(|| target(&bytes));
            assert!(outcome.is_ok(), "{name}: {} fails", input.display());
        }
    }
}

/// Bytes of each shared trace's head that [`the_shared_traces_pass_every_reader`] and
/// `scripts/fuzz` give the trace target: enough for dozens of requests of any format, and small
/// enough that a fuzzing run mutates them quickly.
const TRACE_HEAD_BYTES: usize = 4 * 1024;

/// The heads of the real traces in `../shared/traces` through the trace target, as every
/// format (a mismatched reader must fail in one line, not panic) and detected. The traces are
/// read from there, never copied into the corpus; skipped with a message when they are absent.
#[test]
fn the_shared_traces_pass_every_reader() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipping: real traces not found at {}", dir.display());
        return;
    };
    let formats = heterarchy_trace::TraceFormat::ALL.len() as u8;
    for entry in entries {
        let path = entry.expect("a readable traces folder").path();
        if path.extension().is_some_and(|extension| extension == "md") {
            continue;
        }
        let mut head = Vec::new();
        std::fs::File::open(&path)
            .and_then(|file| file.take(TRACE_HEAD_BYTES as u64).read_to_end(&mut head))
            .expect("a readable trace");
        for pick in 0..=formats {
            let input: Vec<u8> = std::iter::once(pick).chain(head.iter().copied()).collect();
            let outcome = std::panic::catch_unwind(|| heterarchy_fuzz::trace_readers(&input));
            assert!(outcome.is_ok(), "{} as format {pick} fails", path.display());
        }
    }
}
