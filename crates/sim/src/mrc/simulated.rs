//! The miss-ratio curve of any policy, for those no stack algorithm covers: one simulation per
//! cache size, every size fed from one decode of the trace (`cache_sim::run_jobs`).

use heterarchy_policy::PolicySpec;

use super::{log_spaced, Mrc, MrcPoint};
use crate::cache_sim::{
    run_jobs, working_set, SimError, SimJob, SimSettings, TraceSource, WorkingSet,
};

/// The curve of `policy` at `points` log-spaced sizes from one unit to the working set (bytes,
/// or objects with `settings.ignore_obj_size`), plus `extra_sizes`; each point a simulation.
/// Returns the curve and the trace's working set.
pub fn simulated_mrc(
    source: &dyn TraceSource,
    settings: &SimSettings,
    policy: &PolicySpec,
    points: usize,
    extra_sizes: &[u64],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Mrc, WorkingSet), SimError> {
    let whole = working_set(source, progress)?;
    let top = if settings.ignore_obj_size {
        whole.objects
    } else {
        whole.bytes
    };
    let mut sizes = log_spaced(1, top.max(1), points);
    sizes.extend_from_slice(extra_sizes);
    sizes.sort_unstable();
    sizes.dedup();
    let jobs = SimJob::grid(std::slice::from_ref(policy), &sizes);
    let results = run_jobs(source, settings, &jobs, threads, progress)?;
    let curve = Mrc {
        points: results
            .iter()
            .map(|result| MrcPoint {
                cache_size: result.cache_size,
                miss_ratio: result.miss_ratio,
                // As exact curves do: object curves carry no byte miss ratio.
                byte_miss_ratio: (!settings.ignore_obj_size).then_some(result.byte_miss_ratio),
            })
            .collect(),
    };
    Ok((curve, whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache_sim::GeneratedTrace;
    use crate::mrc::exact_mrc;
    use heterarchy_trace::generate::{generator, WorkloadSpec};

    #[test]
    fn lru_simulated_at_each_size_equals_the_stack_algorithm() {
        let spec = WorkloadSpec::parse("zipf:theta=0.9,keys=2000,requests=30000,seed=3").unwrap();
        let settings = SimSettings {
            ignore_obj_size: true,
            ..SimSettings::default()
        };
        let lru = PolicySpec::parse("lru", None).unwrap();
        let source = GeneratedTrace(spec.clone());
        let (simulated, whole) =
            simulated_mrc(&source, &settings, &lru, 12, &[777], 2, &|_| {}).unwrap();
        assert_eq!(whole.requests, 30000);
        let exact = exact_mrc(generator(&spec).unwrap().as_mut(), true, &|_| {}).unwrap();
        assert!(simulated.points.len() >= 10);
        assert!(simulated.points.iter().any(|point| point.cache_size == 777));
        for point in &simulated.points {
            assert_eq!(
                point.miss_ratio,
                exact.miss_ratio_at(point.cache_size),
                "{point:?}"
            );
            assert_eq!(point.byte_miss_ratio, None);
        }
    }
}
