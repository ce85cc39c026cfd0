//! Replays the kept fuzz corpus (`fuzz/corpus/TARGET/*`: the seeds from the tests, and every
//! input a fuzzing run found worth keeping, crashes among them) through the targets' bodies, so
//! that every test run checks what fuzzing once checked.

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
