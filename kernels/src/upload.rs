//! The per-device upload cache: one loaded module per (device, kernel binary), so the second
//! launch of a kernel on a device loads nothing.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::cache::CacheKey;

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
        assert!(
            cache
                .get_or_load(2, key, || Err::<String, _>("no device"))
                .is_err()
        );
        assert_eq!(cache.stats().loads, 2);
    }
}
