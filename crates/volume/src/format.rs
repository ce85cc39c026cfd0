//! Opening a volume: each persistent tier found again where it was formatted for this
//! hierarchy, formatted afresh otherwise, and the lines it held handed back to the controller
//! (docs/architecture.md, "Format and recovery").
//!
//! A tier formatted as another tier of the hierarchy, or for another hierarchy (the tiers in
//! another order, number or size), is refused unless forced: read as this tier, its lines would
//! be misplaced. A tier formatted for another line size or backing store is reformatted when it
//! holds no dirty line, refused otherwise. After a crash a line may be found in tiers the
//! layout forbids together (a move down interrupted between its two entries): its newest
//! sectors are written back and every copy freed, so recovery never guesses.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use heterarchy_device::backend::{open_backend, with_faults, Backend, Throttle, Throttles};
use heterarchy_engine::{CacheController, Controller, Plan, TierLayout};
use heterarchy_trace::generate::mix64;

use crate::config::{caching_error, VolumeConfig};
use crate::cutoff::SequentialCutoff;
use crate::device::Device;
use crate::error::VolumeError;
use crate::failure::Failure;
use crate::job::{Client, Copies, Mode};
use crate::layout::{Geometry, Place, SECTOR_BYTES};
use crate::order::LineOrder;
use crate::placement::Placement;
use crate::sectors::Storage;
use crate::slots::TierSlots;
use crate::stats::Counters;
use crate::volume::{Control, Volume};

/// The config key naming cache tier `tier` of `tiers`: `cache` alone, else `cache[i]`.
fn tier_key(tier: usize, tiers: usize) -> String {
    if tiers == 1 {
        "cache".to_string()
    } else {
        format!("cache[{tier}]")
    }
}

impl Volume {
    /// Opens a volume: the backing store, and each cache tier found again where it is
    /// persistent and was formatted as this tier of this hierarchy; formatted afresh otherwise
    /// (see the module docs for what is refused unless `force`). Errors name the device and
    /// say why.
    pub fn open(config: &VolumeConfig) -> Result<Volume, VolumeError> {
        Volume::open_with(config, &Throttles::default())
    }

    /// [`open`](Self::open) with the server's devices: a throttle named after a declared
    /// device is that device's, shared with everyone who names it.
    pub fn open_with(config: &VolumeConfig, throttles: &Throttles) -> Result<Volume, VolumeError> {
        config.validate()?;
        let backing = open_backend(&config.backing).map_err(|error| VolumeError::Io {
            key: "backing".to_string(),
            error,
        })?;
        let backing = with_faults(backing, config.backing_faults.clone());
        let tiers = config.cache.len();
        let caches = config
            .cache
            .iter()
            .enumerate()
            .map(|(tier, spec)| {
                let cache = open_backend(spec).map_err(|error| VolumeError::Io {
                    key: tier_key(tier, tiers),
                    error,
                })?;
                let faults = config.cache_faults.get(tier).cloned().flatten();
                Ok(with_faults(cache, faults))
            })
            .collect::<Result<Vec<_>, VolumeError>>()?;
        Volume::assemble(config, caches, backing, throttles)
    }

    /// [`open`](Self::open) on storage already opened, one backend per cache tier (the specs
    /// in `config` are not used): for storage of the caller's own, such as a crash-injecting
    /// wrapper. The volume's size is the backing store's, rounded down to whole 512-byte
    /// sectors.
    pub fn with_backends(
        config: &VolumeConfig,
        caches: Vec<Box<dyn Backend>>,
        backing: Box<dyn Backend>,
    ) -> Result<Volume, VolumeError> {
        Volume::assemble(config, caches, backing, &Throttles::default())
    }

    fn assemble(
        config: &VolumeConfig,
        caches: Vec<Box<dyn Backend>>,
        backing: Box<dyn Backend>,
        throttles: &Throttles,
    ) -> Result<Volume, VolumeError> {
        config.validate()?;
        let tiers = caches.len();
        if tiers != config.cache.len() {
            return Err(VolumeError::config(
                "cache",
                format!("{tiers} tiers opened for {} configured", config.cache.len()),
            ));
        }
        let line_bytes = config.cache_line as u32;
        let size_bytes = backing.size_bytes() / u64::from(SECTOR_BYTES) * u64::from(SECTOR_BYTES);
        if size_bytes == 0 {
            return Err(VolumeError::config(
                "backing",
                format!(
                    "{} holds no whole {SECTOR_BYTES}-byte sector",
                    backing.describe()
                ),
            ));
        }
        let exclusive = config.caching.layout == TierLayout::Exclusive;
        let tier_bytes: Vec<u64> = caches.iter().map(|cache| cache.size_bytes()).collect();
        let signature = Place::signature(exclusive, &tier_bytes);
        let mut devices = Vec::with_capacity(tiers + 1);
        let mut capacities = Vec::with_capacity(tiers);
        for (tier, cache) in caches.into_iter().enumerate() {
            let key = tier_key(tier, tiers);
            if cache.size_bytes() > backing.size_bytes() {
                let reason = format!(
                    "{} bytes is larger than the backing store ({} bytes); a cache tier holds \
                     part of what it caches",
                    cache.size_bytes(),
                    backing.size_bytes()
                );
                return Err(VolumeError::config(key, reason));
            }
            let geometry =
                Geometry::for_cache(cache.size_bytes(), line_bytes, backing.size_bytes()).map_err(
                    |error| VolumeError::Geometry {
                        key: key.clone(),
                        error,
                    },
                )?;
            let place = Place {
                tier: tier as u8,
                tiers: tiers as u8,
                signature,
            };
            let slots = find_or_format(cache.as_ref(), geometry, place, config.force, &key)?;
            capacities.push(geometry.slot_count * u64::from(line_bytes));
            let throttle = throttle(
                throttles,
                config.tier_throttle(tier),
                &format!("cache_throttle[{tier}]"),
            )?;
            devices.push(Device::new(
                cache,
                Some(slots),
                throttle,
                config.queue_depth,
            ));
        }
        let backing_throttle = throttle(
            throttles,
            config.backing_throttle.as_deref(),
            "backing_throttle",
        )?;
        devices.push(Device::new(
            backing,
            None,
            backing_throttle,
            config.queue_depth,
        ));
        let seed = config
            .name
            .bytes()
            .fold(0, |hash, byte| mix64(hash ^ u64::from(byte)));
        let controller =
            CacheController::new(&config.caching, &capacities, seed).map_err(caching_error)?;
        let placement = devices[..tiers]
            .iter()
            .map(|device| {
                let slots = device.slots();
                Placement::new(
                    slots.geometry().slot_count,
                    slots
                        .occupied()
                        .into_iter()
                        .filter_map(|(slot, state)| Some((state.key?, slot))),
                )
            })
            .collect();
        let volume = Volume {
            name: config.name.clone(),
            size_bytes,
            line_bytes,
            mode: config.caching.mode,
            layout: config.caching.layout,
            feedback: controller.feedback(),
            storage: Storage {
                devices,
                line_bytes,
                flush_epoch: AtomicU64::new(0),
                epoch: Instant::now(),
            },
            control: Mutex::new(Control {
                controller,
                cutoff: SequentialCutoff::new(&config.seq_cutoff),
                placement,
                spare_plans: Vec::new(),
            }),
            order: Arc::new(LineOrder::default()),
            flushing: Mutex::new(()),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            failure: Failure::new(config.fallback_pt_errors),
        };
        volume.restore().map_err(VolumeError::Restore)?;
        Ok(volume)
    }

    /// Gives the controller the lines the persistent tiers held when the volume last stopped:
    /// a line's copies bottom up (inclusive tiers hold what the tiers below hold). A line in a
    /// shape the layout forbids, or that a tier will not keep, is written back and dropped.
    fn restore(&self) -> io::Result<()> {
        let tiers = self.tiers();
        let mut found: Vec<(u64, Copies, u8)> = Vec::new();
        {
            let control = self.lock_control();
            let mut keys: Vec<u64> = self.storage.devices[..tiers]
                .iter()
                .flat_map(|device| device.slots().occupied())
                .filter_map(|(_, state)| state.key)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let copies = control.copies(key);
                let dirty = self
                    .storage
                    .held(key, &copies)
                    .filter(|(_, _, state)| state.dirty != 0)
                    .fold(0u8, |bits, (tier, ..)| bits | 1 << tier);
                found.push((key, copies, dirty));
            }
        }
        let mut restored = 0;
        for (key, copies, dirty) in found {
            let held: Vec<usize> = (0..tiers).filter(|&tier| copies[tier].is_some()).collect();
            let allowed = match self.layout {
                TierLayout::Exclusive => held.len() == 1,
                // A suffix of the tiers: the volatile ones above are gone.
                TierLayout::Inclusive => held
                    .iter()
                    .enumerate()
                    .all(|(i, &tier)| tier == tiers - held.len() + i),
            };
            let mut kept = allowed;
            if allowed {
                for &tier in held.iter().rev() {
                    let mut plan = Plan::new();
                    let now = 0;
                    let taken = {
                        let mut control = self.lock_control();
                        control.controller.restore_line(
                            tier,
                            key,
                            self.line_bytes,
                            dirty & (1 << tier) != 0,
                            now,
                            &mut plan,
                        )
                    };
                    self.carry_out_plan(plan)?;
                    if !taken {
                        kept = false;
                        break;
                    }
                }
            }
            if kept {
                restored += 1;
            } else {
                self.drop_line(key)?;
            }
        }
        crate::stats::Counters::add(&self.counters.restored_lines, restored);
        if !self.mode.writes_back() {
            self.clean_all()?;
        }
        Ok(())
    }

    /// Carries out a plan made outside any request (restoring's evictions).
    fn carry_out_plan(&self, plan: Plan) -> io::Result<()> {
        if plan.is_empty() && plan.departures().is_empty() {
            return Ok(());
        }
        let job = {
            let mut control = self.lock_control();
            self.resolve(&mut control, plan, None, 0)
        };
        self.in_turn(job, |storage, job| {
            storage.execute(job, Client::None, Mode::Wait)
        })
        .map(|_| ())
    }

    /// Writes a line's newest dirty sectors back and frees every copy, the controller
    /// forgetting it.
    fn drop_line(&self, key: u64) -> io::Result<()> {
        let copies = self.lock_control().copies(key);
        self.storage.rescue(key, &copies)?;
        self.forget(&mut self.lock_control(), key);
        Ok(())
    }
}

/// The throttle a device is paced with, if any: `name` is a declared device, a preset or a
/// device file.
fn throttle(
    throttles: &Throttles,
    name: Option<&str>,
    key: &str,
) -> Result<Option<Arc<Throttle>>, VolumeError> {
    name.map(|name| {
        throttles
            .get(name)
            .map_err(|reason| VolumeError::config(key, reason.to_string()))
    })
    .transpose()
}

/// Reads a persistent tier's superblock and table, or formats it; a volatile tier starts
/// empty. Errors name the tier by its config key `key`.
fn find_or_format(
    cache: &dyn Backend,
    geometry: Geometry,
    place: Place,
    force: bool,
    key: &str,
) -> Result<TierSlots, VolumeError> {
    let io_error = |error: io::Error| VolumeError::Io {
        key: key.to_string(),
        error,
    };
    let refused = |reason: String| VolumeError::Refused {
        key: key.to_string(),
        reason,
    };
    if !cache.is_persistent() {
        return Ok(TierSlots::empty(geometry, false));
    }
    let mut superblock = [0u8; 128];
    cache.read_at(0, &mut superblock).map_err(io_error)?;
    let found = Geometry::decode(superblock[..64].try_into().expect("64 bytes"));
    let found_place = Place::decode(superblock[64..].try_into().expect("64 bytes"));
    if let Some(damaged) = found.filter(|found| !found.fits(cache.size_bytes())) {
        if !force {
            return Err(refused(format!(
                "its superblock describes {} slots of {}-byte lines from byte {}, which do not \
                 fit its {} bytes: damaged, or not a heterarchy cache tier; set force to \
                 reformat it",
                damaged.slot_count,
                damaged.line_bytes,
                damaged.data_offset,
                cache.size_bytes()
            )));
        }
    }
    let found = found.filter(|found| found.fits(cache.size_bytes()));
    match (found, found_place) {
        (Some(found), Some(found_place)) if found == geometry && found_place == place => {
            return TierSlots::load(geometry, cache).map_err(io_error);
        }
        (Some(found), found_place) if !force => {
            let dirty = TierSlots::load(found, cache).map_err(io_error)?.counts().1;
            if let Some(other) = found_place.filter(|other| *other != place) {
                return Err(refused(format!(
                    "was formatted as tier {} of {} of another hierarchy (the tiers were in \
                     another order, number or size) and holds {dirty} dirty lines; give the \
                     tiers as before, or set force to reformat it",
                    other.tier, other.tiers
                )));
            }
            if dirty > 0 {
                return Err(refused(format!(
                    "holds {dirty} dirty lines of a volume of {} bytes with {}-byte lines; \
                     serve it with those settings and flush it, or set force to discard them",
                    found.backing_bytes, found.line_bytes
                )));
            }
        }
        _ => {}
    }
    let (table_start, table_len) = geometry.table_range();
    // Cleared a mebibyte at a time at most; a small tier needs no more than its table.
    let zeroes = vec![0u8; table_len.min(1 << 20) as usize];
    let mut offset = table_start;
    while offset < table_start + table_len {
        let chunk = (table_start + table_len - offset).min(zeroes.len() as u64);
        cache
            .write_at(offset, &zeroes[..chunk as usize])
            .map_err(io_error)?;
        offset += chunk;
    }
    cache.flush().map_err(io_error)?;
    let mut superblock = [0u8; 128];
    superblock[..64].copy_from_slice(&geometry.encode());
    superblock[64..].copy_from_slice(&place.encode());
    cache.write_at(0, &superblock).map_err(io_error)?;
    cache.flush().map_err(io_error)?;
    Ok(TierSlots::empty(geometry, true))
}
