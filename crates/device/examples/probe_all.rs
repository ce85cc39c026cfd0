use heterarchy_device::{presets, run_probe, Probe};
fn main() {
    for name in presets::preset_names() {
        let spec = presets::preset(name).unwrap();
        for qd in [1, 8, 64] {
            for w in [0.0, 1.0] {
                let r = run_probe(
                    &spec,
                    &Probe {
                        queue_depth: qd,
                        write_fraction: w,
                        bytes: spec.granularity_bytes.max(4096),
                        ..Probe::default()
                    },
                );
                println!(
                    "{name:14} qd{qd:3} w{w} lat {:10.1} ns iops {:12.0} bw {:8.3} GB/s",
                    r.mean_latency_ns,
                    r.iops,
                    r.bandwidth_bytes_per_s / 1e9
                );
            }
        }
    }
}
