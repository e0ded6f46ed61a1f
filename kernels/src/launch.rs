//! Launch-side pieces that need no GPU to reason about: the grid shape for `n` elements, and the
//! upload cache that keeps one loaded module per (device, kernel binary).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::cache::CacheKey;

/// Threads per block of every elementwise launch.
pub const BLOCK: u32 = 256;

/// Blocks per multiprocessor the grid aims for: enough resident warps to hide memory latency;
/// the grid-stride loop covers the rest.
const BLOCKS_PER_SM: u32 = 8;

/// Grid and block size for `n` elements on a device with `sm_count` multiprocessors, or `None`
/// when there is nothing to do (a zero-size array launches nothing).
///
/// ```
/// use kusari_kernels::launch::{launch_config, BLOCK};
/// assert_eq!(launch_config(0, 132), None);
/// assert_eq!(launch_config(1000, 132), Some((4, BLOCK)));       // ceil(1000 / 256)
/// assert_eq!(launch_config(1 << 30, 132), Some((132 * 8, BLOCK))); // capped; the loop strides
/// ```
pub fn launch_config(n: usize, sm_count: u32) -> Option<(u32, u32)> {
    if n == 0 {
        return None;
    }
    let needed = n.div_ceil(BLOCK as usize);
    let cap = (sm_count.max(1) * BLOCKS_PER_SM) as usize;
    Some((needed.min(cap) as u32, BLOCK))
}

/// Counters of an [`UploadCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// Lookups answered from the cache.
    pub hits: usize,
    /// Modules loaded onto a device.
    pub loads: usize,
}

/// Loaded kernels memoised per (device, binary key): the second launch of a kernel on a device
/// loads nothing. Lookups take the read lock; only a miss takes the write lock.
pub struct UploadCache<D, M> {
    loaded: RwLock<HashMap<(D, CacheKey), Arc<M>>>,
    hits: AtomicUsize,
    loads: AtomicUsize,
}

impl<D: Eq + Hash + Copy, M> Default for UploadCache<D, M> {
    fn default() -> Self {
        UploadCache {
            loaded: RwLock::new(HashMap::new()),
            hits: AtomicUsize::new(0),
            loads: AtomicUsize::new(0),
        }
    }
}

impl<D: Eq + Hash + Copy, M> UploadCache<D, M> {
    /// The module for `key` on `device`, loading it with `load` on the first request.
    pub fn get_or_load<E>(
        &self,
        device: D,
        key: CacheKey,
        load: impl FnOnce() -> Result<M, E>,
    ) -> Result<Arc<M>, E> {
        if let Some(m) = self
            .loaded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(device, key))
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(m.clone());
        }
        let mut map = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have loaded it between the two locks.
        if let Some(m) = map.get(&(device, key)) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(m.clone());
        }
        let module = Arc::new(load()?);
        self.loads.fetch_add(1, Ordering::Relaxed);
        map.insert((device, key), module.clone());
        Ok(module)
    }

    /// The counters.
    pub fn stats(&self) -> UploadStats {
        UploadStats {
            hits: self.hits.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_once_per_device_and_key_even_under_contention() {
        let cache: UploadCache<usize, String> = UploadCache::default();
        let key = CacheKey(7);
        let loads = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..100 {
                        let m = cache
                            .get_or_load(0, key, || {
                                loads.fetch_add(1, Ordering::SeqCst);
                                Ok::<_, ()>("module on 0".to_string())
                            })
                            .unwrap();
                        assert_eq!(*m, "module on 0");
                    }
                });
            }
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(
            cache.stats(),
            UploadStats {
                hits: 799,
                loads: 1
            }
        );
        // Another device loads its own copy; a failed load is not cached.
        cache
            .get_or_load(1, key, || Ok::<_, ()>("module on 1".into()))
            .unwrap();
        assert_eq!(cache.stats().loads, 2);
        assert!(cache
            .get_or_load(2, key, || Err::<String, _>("no device"))
            .is_err());
        assert_eq!(cache.stats().loads, 2);
    }

    #[test]
    fn launch_config_covers_small_arrays_and_caps_large_ones() {
        assert_eq!(launch_config(1, 1), Some((1, BLOCK)));
        assert_eq!(launch_config(256, 10), Some((1, BLOCK)));
        assert_eq!(launch_config(257, 10), Some((2, BLOCK)));
        assert_eq!(
            launch_config(usize::MAX / 2, 0),
            Some((BLOCKS_PER_SM, BLOCK))
        );
    }
}
