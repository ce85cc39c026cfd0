//! Seed 004's evaluation (§5, Table 2, Table 3, Figs 10–13) on the simulated machine of
//! `sim::poly`: the tier's roles (`poly-roles`), compression (`poly-compression`), the search's
//! trajectory and a phase change (`poly-convergence`), datacenter cost (`poly-tco`) and the
//! online search against an exhaustive sweep (`poly-offline`). The decisions are
//! `engine::poly`'s, the same code the live volume runs.
//!
//! The workloads are YCSB A–F on a million 1 KB records (§5.1), four to a page, with YCSB's
//! own scrambled Zipf keys and data that compresses to half (`compress=0.5`, lz4).

use heterarchy_device::codec::{Codec, CodecCost};
use heterarchy_engine::poly::{knob_grid, Knobs, SearchConfig, SearchPhase};
use heterarchy_report::{LineChart, Series};
use heterarchy_sim::poly::{
    run_poly, run_poly_phases, PolyMachine, PolyResult, PolyRun, PolyScheme,
};
use heterarchy_trace::generate::{WorkloadSpec, YcsbWorkload};
use serde::Serialize;

use crate::{Comparison, ExperimentError, Options, Output};

/// Pages a unit of the paper's machine takes: 38 units hold a million 1 KB records, 4 a page.
pub const UNIT_PAGES: u64 = 6579;
/// The search's measurement window at full scale, simulated seconds (the paper gives none;
/// Table 2's 4 to 8 minutes fit 8 to 16 windows of this).
pub const WINDOW_S: f64 = 30.0;
/// Windows a search runs before its final point is taken: a full functional and a full
/// representational climb and a few held windows.
pub const SEARCH_WINDOWS: u64 = 25;
/// The knobs' step.
pub const STEP: f64 = 0.2;
/// The data's compressibility.
pub const COMPRESSIBILITY: f64 = 0.5;

/// How the tier is run in a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Design {
    /// The tier as memory (the paper's DRAM-Ext).
    DramExt,
    /// The tier as a write cache.
    WriteCache,
    /// Fixed shares, a baseline the search must beat.
    Fixed(Knobs),
    /// The search over the read-cache share only (the paper's Functional-only).
    Functional,
    /// The search over both knobs (Functional+Representational).
    Polymorphic,
}

impl Design {
    pub fn name(self) -> String {
        match self {
            Design::DramExt => "dram-ext".into(),
            Design::WriteCache => "write-cache".into(),
            Design::Fixed(knobs) => format!(
                "fixed-{:.0}r-{:.0}c",
                knobs.read_share * 100.0,
                knobs.compressed_share * 100.0
            ),
            Design::Functional => "functional".into(),
            Design::Polymorphic => "functional+representational".into(),
        }
    }

    fn search(self) -> Option<SearchConfig> {
        let config = SearchConfig {
            step: STEP,
            ..SearchConfig::default()
        };
        match self {
            Design::Functional => Some(SearchConfig {
                compress: false,
                ..config
            }),
            Design::Polymorphic => Some(config),
            _ => None,
        }
    }
}

/// The machine and run lengths of an experiment at `options.scale`: the machine shrinks with
/// the scale (a smaller data set warms up in fewer operations), and so do the windows.
pub struct Setup {
    pub machine: PolyMachine,
    pub codec: Codec,
    pub warmup_ops: u64,
    pub ops: u64,
    pub window_ns: u64,
}

impl Setup {
    pub fn new(options: &Options) -> Setup {
        let scale = options.scale.clamp(0.005, 4.0);
        let unit_pages = ((UNIT_PAGES as f64 * scale).round() as u64).max(16);
        let mut machine = PolyMachine::paper(unit_pages);
        if let Some(cost) = &options.codec_cost {
            machine.costs = machine.costs.with_codec(cost);
        }
        Setup {
            warmup_ops: 8 * machine.data_pages,
            ops: 8 * machine.data_pages,
            window_ns: (WINDOW_S * 1e9 * scale.min(1.0)).max(1e9) as u64,
            codec: options.codec_cost.map_or(Codec::Lz4, |cost| cost.codec),
            machine,
        }
    }

    /// YCSB `workload` over the machine's records.
    pub fn workload(&self, workload: YcsbWorkload) -> WorkloadSpec {
        WorkloadSpec::parse(&format!(
            "ycsb-{}:keys={},compress={COMPRESSIBILITY},scrambled=true,seed=1",
            workload.letter(),
            self.machine.data_pages * self.machine.records_per_page
        ))
        .expect("a valid built-in workload")
    }

    fn fixed_run(&self) -> PolyRun {
        PolyRun {
            warmup_ops: self.warmup_ops,
            ops: self.ops,
            duration_ns: u64::MAX,
            window_ns: self.window_ns,
            codec: self.codec,
        }
    }

    fn search_run(&self) -> PolyRun {
        PolyRun {
            ops: u64::MAX / 4,
            duration_ns: SEARCH_WINDOWS * self.window_ns,
            ..self.fixed_run()
        }
    }

    /// `workload` at fixed knobs.
    pub fn run_fixed(
        &self,
        workload: YcsbWorkload,
        scheme: PolyScheme,
    ) -> Result<PolyResult, ExperimentError> {
        run_poly(
            &self.machine,
            &self.workload(workload),
            scheme,
            &self.fixed_run(),
        )
        .map_err(ExperimentError::from)
    }

    /// The online search on `workload`, from a full write cache.
    pub fn run_search(
        &self,
        workload: YcsbWorkload,
        config: SearchConfig,
    ) -> Result<PolyResult, ExperimentError> {
        run_poly(
            &self.machine,
            &self.workload(workload),
            PolyScheme::Search(config),
            &self.search_run(),
        )
        .map_err(ExperimentError::from)
    }

    /// `design` on `workload`: a search design is measured at the point its search ends on.
    pub fn run_design(
        &self,
        workload: YcsbWorkload,
        design: Design,
    ) -> Result<Row, ExperimentError> {
        let (scheme, search) = match design {
            Design::DramExt => (PolyScheme::DramExt, None),
            Design::WriteCache => (PolyScheme::WriteCache, None),
            Design::Fixed(knobs) => (PolyScheme::Fixed(knobs), None),
            Design::Functional | Design::Polymorphic => {
                let config = design.search().expect("a search design");
                let search = self.run_search(workload, config)?;
                (PolyScheme::Fixed(search.knobs()), Some(search))
            }
        };
        let result = self.run_fixed(workload, scheme)?;
        Ok(Row::new(workload, design, &result, search.as_ref()))
    }
}

/// One design on one workload: the row of `poly-roles` and `poly-compression`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub design: String,
    pub read_share: f64,
    pub compressed_share: f64,
    pub throughput: f64,
    /// Throughput over DRAM-Ext's on the same workload.
    pub vs_dram_ext: f64,
    pub read_latency_us_p90: f64,
    pub write_latency_us_p90: f64,
    /// Shares of page accesses served by memory (DRAM and the read-cache role), the write
    /// cache, the compressed store and the SSD.
    pub memory_share: f64,
    pub write_cache_share: f64,
    pub compressed_hit_share: f64,
    pub ssd_share: f64,
    /// Writes that waited for a write-back.
    pub sync_write_backs: u64,
    /// Simulated seconds the search took to settle (search designs).
    pub converged_s: Option<f64>,
}

impl Row {
    fn new(
        workload: YcsbWorkload,
        design: Design,
        result: &PolyResult,
        search: Option<&PolyResult>,
    ) -> Row {
        let memory = result.dram_hits + result.read_cache_hits;
        let accesses =
            (memory + result.write_cache_hits + result.compressed_hits + result.ssd_reads).max(1)
                as f64;
        Row {
            workload: format!("ycsb-{}", workload.letter()),
            design: design.name(),
            read_share: result.read_share,
            compressed_share: result.compressed_share,
            throughput: result.throughput,
            vs_dram_ext: 0.0,
            read_latency_us_p90: result.read_latency_us_p90,
            write_latency_us_p90: result.write_latency_us_p90,
            memory_share: memory as f64 / accesses,
            write_cache_share: result.write_cache_hits as f64 / accesses,
            compressed_hit_share: result.compressed_hits as f64 / accesses,
            ssd_share: result.ssd_reads as f64 / accesses,
            sync_write_backs: result.sync_write_backs,
            converged_s: search.and_then(PolyResult::converged_s),
        }
    }
}

/// Every design on every workload, with each row's throughput over DRAM-Ext's (DRAM-Ext is
/// always run).
pub fn run_designs(options: &Options, designs: &[Design]) -> Result<Vec<Row>, ExperimentError> {
    let setup = Setup::new(options);
    let mut all = vec![Design::DramExt];
    all.extend(designs.iter().copied().filter(|d| *d != Design::DramExt));
    let jobs: Vec<(YcsbWorkload, Design)> = YcsbWorkload::ALL
        .into_iter()
        .flat_map(|workload| all.iter().map(move |design| (workload, *design)))
        .collect();
    let mut rows = options
        .run_all(&jobs, |(workload, design)| {
            setup.run_design(*workload, *design)
        })
        .into_iter()
        .collect::<Result<Vec<Row>, _>>()?;
    for index in 0..rows.len() {
        let base = rows
            .iter()
            .find(|r| r.workload == rows[index].workload && r.design == Design::DramExt.name())
            .map_or(f64::NAN, |r| r.throughput);
        rows[index].vs_dram_ext = rows[index].throughput / base;
    }
    Ok(rows)
}

/// The row of `design` on `workload`.
pub fn find(rows: &[Row], workload: YcsbWorkload, design: Design) -> Option<&Row> {
    let workload = format!("ycsb-{}", workload.letter());
    rows.iter()
        .find(|r| r.workload == workload && r.design == design.name())
}

/// The mean over the workloads of `value(design's row, base's row)`, skipping `skip`.
fn mean_over(
    rows: &[Row],
    design: Design,
    base: Design,
    skip: &[YcsbWorkload],
    value: impl Fn(&Row, &Row) -> f64,
) -> f64 {
    let values: Vec<f64> = YcsbWorkload::ALL
        .into_iter()
        .filter(|w| !skip.contains(w))
        .filter_map(|w| Some(value(find(rows, w, design)?, find(rows, w, base)?)))
        .collect();
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn change(ours: f64, base: f64) -> f64 {
    ours / base - 1.0
}

fn percent(value: f64) -> String {
    format!("{:+.0}%", value * 100.0)
}

/// A chart of each design's throughput over DRAM-Ext's, workloads A–F as 1–6.
fn throughput_chart(rows: &[Row], designs: &[Design], title: &str) -> LineChart {
    let mut chart = LineChart::new(title, "YCSB workload (1 = A ... 6 = F)", "× DRAM-Ext");
    for design in designs {
        let points = YcsbWorkload::ALL
            .into_iter()
            .enumerate()
            .filter_map(|(index, w)| {
                Some(((index + 1) as f64, find(rows, w, *design)?.vs_dram_ext))
            })
            .collect();
        chart.series.push(Series {
            name: design.name(),
            points,
        });
    }
    chart
}

/// `designs` on every workload, as an output titled `title` with their throughput chart.
fn designs_output(
    options: &Options,
    designs: &[Design],
    title: &str,
) -> Result<(Vec<Row>, Output), ExperimentError> {
    let rows = run_designs(options, designs)?;
    let mut output = Output::new(title, &rows);
    output
        .charts
        .push(throughput_chart(&rows, designs, "Throughput over DRAM-Ext"));
    Ok((rows, output))
}

fn common_notes(output: &mut Output, options: &Options) {
    let setup = Setup::new(options);
    let costs = setup.machine.costs;
    output.notes.push(format!(
        "Machine: {} data pages over a {}-page DRAM page cache and a {}-page tier (38 : 26 : 6, \
         §5.2), {} YCSB clients, {} write-backs outstanding; SSD under load as Fig 6 \
         (reads 400 µs mean, 500 µs p95; writes 850 µs mean, 4200 µs p95).",
        setup.machine.data_pages,
        setup.machine.dram_pages,
        setup.machine.tier_pages,
        setup.machine.clients,
        setup.machine.writeback_depth
    ));
    output.notes.push(format!(
        "Access paths: memory {} ns; fault {} µs; storage stack {} µs per 4 KiB; op {} µs; \
         compression {:.2} µs/KiB, decompression {:.2} µs/KiB ({}).",
        costs.memory_ns,
        costs.fault_ns / 1000,
        costs.stack_ns / 1000,
        costs.op_cpu_ns / 1000,
        costs.compress_ns_per_kib / 1e3,
        costs.decompress_ns_per_kib / 1e3,
        match &options.codec_cost {
            Some(cost) => format!("{} measured on this machine", cost.codec.name()),
            None => "the paper's Fig 4c figures".into(),
        }
    ));
    output.notes.push(
        "Keys are YCSB's scrambled Zipf (ranks among 10^10 items hashed onto the records), so \
         about 40% of requests land uniformly: the paper's data set exceeds DRAM and tier \
         together, and misses matter."
            .into(),
    );
}

/// `poly-roles`: DRAM-Ext, the write cache, fixed half-and-half shares and the functional
/// search (§5.2, Fig 10 without compression, Fig 11's best split).
pub fn run_roles(options: &Options) -> Result<Output, ExperimentError> {
    let half = Design::Fixed(Knobs {
        read_share: 0.5,
        compressed_share: 0.0,
    });
    let designs = [
        Design::DramExt,
        Design::WriteCache,
        half,
        Design::Functional,
    ];
    let (rows, mut output) = designs_output(
        options,
        &designs,
        "The tier's roles over YCSB A-F (seed 004 §5.2, Fig 10 and 11)",
    )?;
    let write_workloads = [YcsbWorkload::C];
    let best_functional = YcsbWorkload::ALL
        .into_iter()
        .filter_map(|w| {
            Some(change(
                find(&rows, w, Design::Functional)?.throughput,
                find(&rows, w, Design::WriteCache)?.throughput,
            ))
        })
        .fold(f64::NEG_INFINITY, f64::max);
    output.comparisons = vec![
        Comparison {
            what: "Write-Cache throughput over DRAM-Ext, mean of A-F".into(),
            thesis: "2.5x".into(),
            ours: format!(
                "{:.2}x",
                mean_over(&rows, Design::WriteCache, Design::DramExt, &[], |a, b| a
                    .throughput
                    / b.throughput)
            ),
        },
        Comparison {
            what: "Functional over Write-Cache, best workload".into(),
            thesis: "up to +70%".into(),
            ours: percent(best_functional),
        },
        Comparison {
            what: "p90 read tail, Write-Cache against DRAM-Ext (mean)".into(),
            thesis: "-40%".into(),
            ours: percent(mean_over(
                &rows,
                Design::WriteCache,
                Design::DramExt,
                &[],
                |a, b| change(a.read_latency_us_p90, b.read_latency_us_p90),
            )),
        },
        Comparison {
            what: "p90 write tail, Write-Cache against DRAM-Ext (mean, C has no writes)".into(),
            thesis: "-36%".into(),
            ours: percent(mean_over(
                &rows,
                Design::WriteCache,
                Design::DramExt,
                &write_workloads,
                |a, b| change(a.write_latency_us_p90, b.write_latency_us_p90),
            )),
        },
        Comparison {
            what: "p90 read tail, Functional against DRAM-Ext (mean)".into(),
            thesis: "-80%".into(),
            ours: percent(mean_over(
                &rows,
                Design::Functional,
                Design::DramExt,
                &[],
                |a, b| change(a.read_latency_us_p90, b.read_latency_us_p90),
            )),
        },
        share_comparison(&rows, YcsbWorkload::C, Design::Functional, "80% read cache"),
    ];
    common_notes(&mut output, options);
    Ok(output)
}

fn share_comparison(
    rows: &[Row],
    workload: YcsbWorkload,
    design: Design,
    paper: &str,
) -> Comparison {
    let row = find(rows, workload, design);
    Comparison {
        what: format!(
            "YCSB-{}: {} final shares",
            workload.letter().to_ascii_uppercase(),
            design.name()
        ),
        thesis: paper.into(),
        ours: row.map_or("-".into(), |r| {
            format!(
                "{:.0}% read cache, {:.0}% compressed",
                r.read_share * 100.0,
                r.compressed_share * 100.0
            )
        }),
    }
}

/// `poly-compression`: the roles with and without compression (§5.2, Fig 10, Fig 12).
pub fn run_compression(options: &Options) -> Result<Output, ExperimentError> {
    let designs = [
        Design::DramExt,
        Design::WriteCache,
        Design::Functional,
        Design::Polymorphic,
    ];
    let (rows, mut output) = designs_output(
        options,
        &designs,
        "Compression on top of the roles (seed 004 §5.2, Fig 10 and 12)",
    )?;
    output.comparisons = vec![
        Comparison {
            what: "Functional+Representational over Write-Cache, mean of A-F".into(),
            thesis: "+90%".into(),
            ours: percent(mean_over(
                &rows,
                Design::Polymorphic,
                Design::WriteCache,
                &[],
                |a, b| change(a.throughput, b.throughput),
            )),
        },
        Comparison {
            what: "p90 read tail, Functional+Representational against DRAM-Ext (mean)".into(),
            thesis: "about -80%".into(),
            ours: percent(mean_over(
                &rows,
                Design::Polymorphic,
                Design::DramExt,
                &[],
                |a, b| change(a.read_latency_us_p90, b.read_latency_us_p90),
            )),
        },
        Comparison {
            what: "p90 write tail, Functional+Representational against DRAM-Ext (mean, no C)"
                .into(),
            thesis: "-85%".into(),
            ours: percent(mean_over(
                &rows,
                Design::Polymorphic,
                Design::DramExt,
                &[YcsbWorkload::C],
                |a, b| change(a.write_latency_us_p90, b.write_latency_us_p90),
            )),
        },
        share_comparison(
            &rows,
            YcsbWorkload::A,
            Design::Polymorphic,
            "20% compressed, the rest write cache",
        ),
        share_comparison(
            &rows,
            YcsbWorkload::F,
            Design::Polymorphic,
            "20% compressed, the rest write cache",
        ),
        share_comparison(
            &rows,
            YcsbWorkload::C,
            Design::Polymorphic,
            "functional only",
        ),
        share_comparison(
            &rows,
            YcsbWorkload::E,
            Design::Polymorphic,
            "functional only",
        ),
    ];
    common_notes(&mut output, options);
    Ok(output)
}

/// One measurement window of a search: the row of `poly-convergence`.
#[derive(Clone, Debug, Serialize)]
pub struct WindowRow {
    /// The workload, or `ycsb-c→a` for the phase change.
    pub run: String,
    pub window: usize,
    /// Simulated seconds from the start when the window ended.
    pub time_s: f64,
    pub read_share: f64,
    pub compressed_share: f64,
    pub throughput: f64,
    pub phase: String,
    pub restarted: bool,
}

fn window_rows(run: &str, result: &PolyResult) -> Vec<WindowRow> {
    result
        .trajectory
        .iter()
        .enumerate()
        .map(|(window, (time_s, step))| WindowRow {
            run: run.to_string(),
            window: window + 1,
            time_s: *time_s,
            read_share: step.measured.read_share,
            compressed_share: step.measured.compressed_share,
            throughput: step.performance,
            phase: match step.phase {
                SearchPhase::Functional => "functional",
                SearchPhase::Representational => "representational",
                SearchPhase::Holding => "holding",
            }
            .into(),
            restarted: step.restarted,
        })
        .collect()
}

/// The phase-change run of Fig 13: YCSB-C for `windows_each` windows' worth of operations,
/// then YCSB-A as long again, under the search.
pub fn run_phase_change(setup: &Setup, windows_each: u64) -> Result<PolyResult, ExperimentError> {
    // Operations for a phase: the windows at a generous rate, so C lasts at least that long.
    let ops_each = (windows_each as f64 * setup.window_ns as f64 / 1e9 * 20_000.0) as u64;
    let phases = [
        (setup.workload(YcsbWorkload::C), setup.warmup_ops + ops_each),
        (setup.workload(YcsbWorkload::A), ops_each),
    ];
    let run = PolyRun {
        duration_ns: 2 * windows_each * setup.window_ns,
        ..setup.search_run()
    };
    run_poly_phases(
        &setup.machine,
        &phases,
        PolyScheme::Search(Design::Polymorphic.search().expect("a search")),
        &run,
    )
    .map_err(ExperimentError::from)
}

/// `poly-convergence`: the search's trajectory on every workload, and YCSB-C turning into
/// YCSB-A (Table 2, Fig 13).
pub fn run_convergence(options: &Options) -> Result<Output, ExperimentError> {
    let setup = Setup::new(options);
    let config = Design::Polymorphic.search().expect("a search");
    let jobs: Vec<Option<YcsbWorkload>> = YcsbWorkload::ALL
        .into_iter()
        .map(Some)
        .chain([None])
        .collect();
    let results = options
        .run_all(&jobs, |job| match job {
            Some(workload) => setup.run_search(*workload, config),
            None => run_phase_change(&setup, SEARCH_WINDOWS),
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    let mut chart = LineChart::new(
        "The search's read-cache share, window by window",
        "simulated minutes",
        "read-cache share",
    );
    let mut minutes = Vec::new();
    for (job, result) in jobs.iter().zip(&results) {
        let name = match job {
            Some(workload) => format!("ycsb-{}", workload.letter()),
            None => "ycsb-c→a".into(),
        };
        rows.extend(window_rows(&name, result));
        chart.series.push(Series {
            name: name.clone(),
            points: result
                .trajectory
                .iter()
                .map(|(time_s, step)| (time_s / 60.0, step.next.read_share))
                .collect(),
        });
        if job.is_some() {
            minutes.push(result.converged_s().unwrap_or(0.0) / 60.0);
        }
    }
    let phase_change = results.last().expect("the phase-change run");
    let restarted = phase_change.trajectory.iter().any(|(_, s)| s.restarted);
    let c_final = results[2]
        .trajectory
        .iter()
        .rev()
        .find(|(_, s)| s.phase == SearchPhase::Holding);
    let mut output = Output::new(
        "The search's trajectory and a phase change (seed 004 Table 2, Fig 13)",
        &rows,
    );
    output.charts.push(chart);
    let (low, high) = minutes
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), m| (l.min(*m), h.max(*m)));
    output.comparisons = vec![
        Comparison {
            what: "Time to converge (paper: its four production traces; ours: YCSB A-F)".into(),
            thesis: "4 to 8 min".into(),
            ours: format!(
                "{low:.1} to {high:.1} min (windows of {:.0} s)",
                setup.window_ns as f64 / 1e9
            ),
        },
        Comparison {
            what: "YCSB-C settles at".into(),
            thesis: "80% read cache, 20% write cache".into(),
            ours: c_final.map_or("did not settle".into(), |(_, s)| {
                format!("{:.0}% read cache", s.next.read_share * 100.0)
            }),
        },
        Comparison {
            what: "YCSB-C turns into YCSB-A: the search restarts from a full write cache".into(),
            thesis: "restarts".into(),
            ours: if restarted {
                "restarts"
            } else {
                "does not restart"
            }
            .into(),
        },
        Comparison {
            what: "YCSB-A after the change settles at".into(),
            thesis: "80% write cache, 20% compressed".into(),
            ours: format!(
                "{:.0}% read cache, {:.0}% compressed",
                phase_change.read_share * 100.0,
                phase_change.compressed_share * 100.0
            ),
        },
    ];
    common_notes(&mut output, options);
    output.notes.push(
        "Table 2's traces (Cloud-Storage, Map-Reduce, Search-Index, Search-Serve) are not \
         public; the YCSB workloads stand in for them."
            .into(),
    );
    Ok(output)
}

/// Online against offline on one workload: the row of `poly-offline`.
#[derive(Clone, Debug, Serialize)]
pub struct OfflineRow {
    pub workload: String,
    pub online_throughput: f64,
    pub offline_throughput: f64,
    pub online_read_share: f64,
    pub online_compressed_share: f64,
    pub offline_read_share: f64,
    pub offline_compressed_share: f64,
    /// The online point's throughput below the offline optimum's.
    pub gap: f64,
    /// Grid points the sweep measured.
    pub points: usize,
}

/// The online search (both knobs) on every workload, in YCSB's order.
fn searches(options: &Options, setup: &Setup) -> Result<Vec<PolyResult>, ExperimentError> {
    let config = Design::Polymorphic.search().expect("a search");
    options
        .run_all(&YcsbWorkload::ALL, |workload| {
            setup.run_search(*workload, config)
        })
        .into_iter()
        .collect()
}

/// `poly-offline`: the online search's final point against every point of the knob grid
/// (Table 2's reference), both measured the same way.
pub fn run_offline(options: &Options) -> Result<Output, ExperimentError> {
    let setup = Setup::new(options);
    let grid = knob_grid(STEP)?;
    let searches = searches(options, &setup)?;
    let jobs: Vec<(YcsbWorkload, Knobs)> = YcsbWorkload::ALL
        .into_iter()
        .flat_map(|w| grid.iter().map(move |k| (w, *k)))
        .collect();
    let measured = options
        .run_all(&jobs, |(workload, knobs)| {
            setup.run_fixed(*workload, PolyScheme::Fixed(*knobs))
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    for (index, workload) in YcsbWorkload::ALL.into_iter().enumerate() {
        let search = &searches[index];
        let online = search.knobs();
        let points = &measured[index * grid.len()..(index + 1) * grid.len()];
        let (best_index, best) = points
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.throughput.total_cmp(&b.1.throughput))
            .expect("a grid");
        // The online point is on the grid: its measurement is the sweep's.
        let online_throughput = grid
            .iter()
            .position(|k| knobs_equal(*k, online))
            .map_or(f64::NAN, |i| points[i].throughput);
        rows.push(OfflineRow {
            workload: format!("ycsb-{}", workload.letter()),
            online_throughput,
            offline_throughput: best.throughput,
            online_read_share: online.read_share,
            online_compressed_share: online.compressed_share,
            offline_read_share: grid[best_index].read_share,
            offline_compressed_share: grid[best_index].compressed_share,
            gap: 1.0 - online_throughput / best.throughput,
            points: grid.len(),
        });
    }
    let mut output = Output::new(
        "The online search against an exhaustive sweep (seed 004 Table 2)",
        &rows,
    );
    let worst = rows.iter().map(|r| r.gap).fold(0.0f64, f64::max);
    output.comparisons = vec![Comparison {
        what: "Online split against the offline exhaustive search".into(),
        thesis: "the same split".into(),
        ours: format!("within {:.1}% of the optimum's throughput", worst * 100.0),
    }];
    common_notes(&mut output, options);
    output.notes.push(
        "YCSB-D inserts 5% of its operations, so its data set grows by more than half over a \
         search of 25 windows; the climb then compares windows of a moving target and stops \
         early. The sweep's points are measured over shorter runs."
            .into(),
    );
    Ok(output)
}

fn knobs_equal(a: Knobs, b: Knobs) -> bool {
    (a.read_share - b.read_share).abs() < 1e-9
        && (a.compressed_share - b.compressed_share).abs() < 1e-9
}

/// One provisioning strategy at one BB-DRAM cost ratio: the row of `poly-tco`.
#[derive(Clone, Debug, Serialize)]
pub struct TcoRow {
    pub strategy: String,
    pub bb_dram_cost_ratio: f64,
    /// Per server, GB.
    pub dram_gb: f64,
    pub bb_dram_gb: f64,
    /// Datacenter TCO over App-Specific-Static's at 1.2×.
    pub tco_increase: f64,
    pub paper_tco_increase: f64,
}

/// What the workloads need, GB at the paper's scale (a unit is 1 GB): DRAM for memory and
/// BB-DRAM for the write cache, from the online search's final split on each.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Need {
    pub memory_gb: f64,
    pub write_cache_gb: f64,
}

/// Prices of §3.4 and the datacenter model of Hamilton ("Overall Data Center Costs", 2010),
/// which the paper uses: servers are 57% of the monthly cost, and the rest (power, cooling,
/// networking, building) scales with the number of servers, not with their memory.
pub mod tco {
    /// SSD and DRAM, $ per GB (§3.4).
    pub const SSD_PER_GB: f64 = 0.25;
    pub const DRAM_PER_GB: f64 = 10.0;
    /// A server without its memory and SSD, $ (Hamilton's 2010 server).
    pub const SERVER_BASE: f64 = 1450.0;
    /// The servers' share of the monthly cost.
    pub const SERVER_SHARE: f64 = 0.57;
    /// The SSD of the paper's VM, GB (§5.1).
    pub const SSD_GB: f64 = 128.0;
    /// BB-DRAM's price over DRAM's (Table 3's columns).
    pub const RATIOS: [f64; 3] = [1.2, 1.5, 2.0];
}

/// Table 3's three strategies from the needs of a mix of applications, one server each.
pub fn tco_rows(needs: &[Need]) -> Vec<TcoRow> {
    let paper = [
        ("app-specific-static", [0.0, 0.435, 1.19]),
        ("app-oblivious-static", [2.18, 2.925, 4.15]),
        ("app-oblivious-dynamic", [0.205, 0.947, 2.18]),
    ];
    let max = |f: &dyn Fn(&Need) -> f64| needs.iter().map(f).fold(0.0f64, f64::max);
    let peak_write_cache = max(&|n| n.write_cache_gb);
    // Per strategy: each server's (DRAM, BB-DRAM).
    let servers = |strategy: &str| -> Vec<(f64, f64)> {
        match strategy {
            "app-specific-static" => needs
                .iter()
                .map(|n| (n.memory_gb, n.write_cache_gb))
                .collect(),
            "app-oblivious-static" => {
                vec![(max(&|n| n.memory_gb), peak_write_cache); needs.len()]
            }
            _ => {
                // BB-DRAM at the peak write-cache need; DRAM only for what BB-DRAM serving as
                // memory cannot cover.
                let total = max(&|n| n.memory_gb + n.write_cache_gb);
                vec![((total - peak_write_cache).max(0.0), peak_write_cache); needs.len()]
            }
        }
    };
    let capital = |servers: &[(f64, f64)], ratio: f64| -> f64 {
        servers
            .iter()
            .map(|(dram, bb)| {
                tco::SERVER_BASE
                    + tco::SSD_GB * tco::SSD_PER_GB
                    + dram * tco::DRAM_PER_GB
                    + bb * tco::DRAM_PER_GB * ratio
            })
            .sum()
    };
    let reference = capital(&servers("app-specific-static"), tco::RATIOS[0]);
    // The rest of the datacenter's cost, fixed per server.
    let rest = reference * (1.0 - tco::SERVER_SHARE) / tco::SERVER_SHARE;
    let mut rows = Vec::new();
    for (strategy, paper_values) in paper {
        let servers = servers(strategy);
        let dram = servers.iter().map(|s| s.0).sum::<f64>() / servers.len().max(1) as f64;
        let bb = servers.iter().map(|s| s.1).sum::<f64>() / servers.len().max(1) as f64;
        for (ratio, paper_value) in tco::RATIOS.into_iter().zip(paper_values) {
            let total = capital(&servers, ratio) + rest;
            rows.push(TcoRow {
                strategy: strategy.into(),
                bb_dram_cost_ratio: ratio,
                dram_gb: dram,
                bb_dram_gb: bb,
                tco_increase: total / (reference + rest) - 1.0,
                paper_tco_increase: paper_value / 100.0,
            });
        }
    }
    rows
}

/// `poly-tco`: Table 3 from the workloads' measured needs.
pub fn run_tco(options: &Options) -> Result<Output, ExperimentError> {
    let setup = Setup::new(options);
    let searches = searches(options, &setup)?;
    // A unit of the machine is a GB of the paper's (26 GB DRAM, 6 GB BB-DRAM).
    let needs: Vec<Need> = searches
        .iter()
        .map(|s| Need {
            memory_gb: 26.0 + 6.0 * s.read_share,
            write_cache_gb: 6.0 * (1.0 - s.read_share),
        })
        .collect();
    let rows = tco_rows(&needs);
    let mut output = Output::new(
        "Datacenter cost of three ways to provision BB-DRAM (seed 004 Table 3)",
        &rows,
    );
    for row in rows.iter().filter(|r| r.bb_dram_cost_ratio == 2.0) {
        output.comparisons.push(Comparison {
            what: format!("{} at 2x", row.strategy),
            thesis: format!("+{:.2}%", row.paper_tco_increase * 100.0),
            ours: format!("+{:.2}%", row.tco_increase * 100.0),
        });
    }
    let needs_text: Vec<String> = YcsbWorkload::ALL
        .iter()
        .zip(&needs)
        .map(|(w, n)| {
            format!(
                "{}: {:.1} GB memory, {:.1} GB write cache",
                w.letter().to_ascii_uppercase(),
                n.memory_gb,
                n.write_cache_gb
            )
        })
        .collect();
    output.notes.push(format!(
        "Needs (from the online search on each workload; the compressed store counts as write \
         cache): {}.",
        needs_text.join("; ")
    ));
    output.notes.push(format!(
        "Prices: SSD ${}/GB, DRAM ${}/GB (§3.4), BB-DRAM 1.2x to 2x DRAM; a ${} server base \
         and servers at {:.0}% of the monthly cost (Hamilton 2010). One server per workload.",
        tco::SSD_PER_GB,
        tco::DRAM_PER_GB,
        tco::SERVER_BASE,
        tco::SERVER_SHARE * 100.0
    ));
    common_notes(&mut output, options);
    Ok(output)
}

/// This machine's cost of `codec` on the experiments' data, for [`Options::codec_cost`].
pub fn measure_codec(codec: Codec) -> CodecCost {
    heterarchy_device::codec::measure(codec, COMPRESSIBILITY, 4096)
}
