//! Independent runs spread over threads: a shared counter hands out the next item, so long and
//! short runs balance themselves, and results come back in item order (deterministic whatever
//! the thread count).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `run` applied to every item on up to `threads` threads; results in item order.
pub fn map_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    run: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                let result = run(item);
                results.lock().expect("no worker panics")[index] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|result| result.expect("every item ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_item_order_on_any_thread_count() {
        let items: Vec<u64> = (0..100).collect();
        for threads in [0, 1, 3, 200] {
            let squares = map_parallel(&items, threads, |x| x * x);
            assert_eq!(squares, items.iter().map(|x| x * x).collect::<Vec<_>>());
        }
    }
}
