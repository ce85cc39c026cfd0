//! Crash campaigns (docs/architecture.md, "Testing": crash tests by injection and by kill -9,
//! many iterations, random points, the seed printed on failure): one store's trials run seed
//! after seed, each trial's failure sorted by the damage it found, and one machine-readable line
//! that `scripts/crash-campaign` gathers into its summary table.
//!
//! The line: `crash campaign: store=NAME trials=N crashes=C lost_flushed=L torn=T phantom=P
//! other=O failed_seeds=S seconds=X`, with `failed_seeds` a comma-separated list (`-` when none).
//! A lost flushed write is one the store promised would survive (flushed, FUA, or acknowledged
//! on a store whose every acknowledged write is durable) that a crash took; torn is data read
//! back part of one version and part of another, or another block's; phantom is data never
//! written there.

use std::time::Instant;

/// The environment variable giving the first seed of a campaign (0 when unset): with a trial
/// count of 1 it runs exactly the seed a failure printed.
pub const FIRST_SEED_VAR: &str = "CRASH_FIRST_SEED";

/// The kind of damage a failed trial reports, from the words of its message: "torn" (or "holds
/// block", another block's data), "phantom", "lost"; anything else is an other failure (a store
/// that would not reopen, an error reading it back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// A write the store had promised to keep is gone.
    LostFlushed,
    /// Data partly of one version and partly of another, or of another block.
    Torn,
    /// Data that was never written there.
    Phantom,
    /// Any other failure.
    Other,
}

impl Damage {
    /// The damage a trial's failure message describes.
    pub fn of(message: &str) -> Damage {
        if message.contains("torn") || message.contains("holds block") {
            Damage::Torn
        } else if message.contains("phantom") {
            Damage::Phantom
        } else if message.contains("lost") {
            Damage::LostFlushed
        } else {
            Damage::Other
        }
    }
}

/// What a campaign found, trial by trial.
#[derive(Clone, Debug, Default)]
pub struct CampaignTally {
    /// Trials run.
    pub trials: u64,
    /// Crashes injected over all trials (a failed trial counts the one it failed after).
    pub crashes: u64,
    /// Each failed trial's seed and message.
    pub failures: Vec<(u64, String)>,
}

impl CampaignTally {
    /// Adds one trial's result: the crashes it injected, or why it failed.
    pub fn add(&mut self, seed: u64, result: Result<u64, String>) {
        self.trials += 1;
        match result {
            Ok(crashes) => self.crashes += crashes,
            Err(why) => {
                self.crashes += 1;
                self.failures.push((seed, why));
            }
        }
    }

    /// Failed trials with damage of kind `damage`.
    pub fn count(&self, damage: Damage) -> usize {
        self.failures
            .iter()
            .filter(|(_, why)| Damage::of(why) == damage)
            .count()
    }

    /// The campaign's machine-readable line (see the module docs).
    pub fn line(&self, store: &str, seconds: f64) -> String {
        let failed_seeds = if self.failures.is_empty() {
            "-".to_string()
        } else {
            let seeds: Vec<String> = self
                .failures
                .iter()
                .map(|(seed, _)| seed.to_string())
                .collect();
            seeds.join(",")
        };
        format!(
            "crash campaign: store={store} trials={} crashes={} lost_flushed={} torn={} \
             phantom={} other={} failed_seeds={failed_seeds} seconds={seconds:.1}",
            self.trials,
            self.crashes,
            self.count(Damage::LostFlushed),
            self.count(Damage::Torn),
            self.count(Damage::Phantom),
            self.count(Damage::Other),
        )
    }
}

/// Runs a crash campaign for `store`: `trial(seed)` for as many seeds as the environment
/// variable `trials_var` says (else `default_trials`), from [`FIRST_SEED_VAR`]'s seed on; a
/// trial returns the crashes it injected or why it failed, its message naming the damage as
/// [`Damage::of`] reads it. Prints each failure (`crash campaign: store=NAME seed=S: why`), then
/// the campaign's line, and panics naming the first failing seeds if any trial failed.
pub fn run_crash_campaign(
    store: &str,
    trials_var: &str,
    default_trials: u64,
    mut trial: impl FnMut(u64) -> Result<u64, String>,
) {
    let number = |var: &str| -> Option<u64> {
        let text = std::env::var(var).ok()?;
        Some(text.trim().parse().unwrap_or_else(|_| {
            panic!("{var}={text}: expected a whole number");
        }))
    };
    let trials = number(trials_var).unwrap_or(default_trials);
    let first_seed = number(FIRST_SEED_VAR).unwrap_or(0);
    let started = Instant::now();
    let mut tally = CampaignTally::default();
    for seed in first_seed..first_seed.saturating_add(trials) {
        let result = trial(seed);
        if let Err(why) = &result {
            eprintln!("crash campaign: store={store} seed={seed}: {why}");
        }
        tally.add(seed, result);
    }
    eprintln!("{}", tally.line(store, started.elapsed().as_secs_f64()));
    let first: Vec<String> = tally
        .failures
        .iter()
        .take(5)
        .map(|(seed, why)| format!("seed {seed}: {why}"))
        .collect();
    assert!(
        tally.failures.is_empty(),
        "{store}: {} of {trials} trials failed: {}",
        tally.failures.len(),
        first.join("; ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_sorted_by_their_words_and_counted_in_the_line() {
        let mut tally = CampaignTally::default();
        tally.add(0, Ok(2));
        tally.add(1, Err("block 3 is torn".into()));
        tally.add(2, Err("block 3 holds block 4's data".into()));
        tally.add(
            3,
            Err("page 1 holds version 9, never issued (phantom)".into()),
        );
        tally.add(
            4,
            Err("block 2 holds version 1, 5 was flushed (lost)".into()),
        );
        tally.add(5, Err("reopening: no superblock".into()));
        tally.add(6, Ok(1));
        assert_eq!(tally.count(Damage::Torn), 2);
        assert_eq!(tally.count(Damage::Phantom), 1);
        assert_eq!(tally.count(Damage::LostFlushed), 1);
        assert_eq!(tally.count(Damage::Other), 1);
        assert_eq!(
            tally.line("btt", 1.26),
            "crash campaign: store=btt trials=7 crashes=8 lost_flushed=1 torn=2 phantom=1 \
             other=1 failed_seeds=1,2,3,4,5 seconds=1.3"
        );
    }

    #[test]
    fn a_clean_campaign_names_no_seed() {
        let mut tally = CampaignTally::default();
        for seed in 0..3 {
            tally.add(seed, Ok(1));
        }
        assert!(tally.line("kv", 0.0).ends_with(
            "trials=3 crashes=3 lost_flushed=0 torn=0 phantom=0 other=0 failed_seeds=- seconds=0.0"
        ));
    }
}
