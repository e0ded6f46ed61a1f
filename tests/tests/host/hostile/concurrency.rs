//! Many threads accumulating gradients into one variable lose no update; configuration guards
//! dropped in any order restore exactly what each changed.

use std::sync::Barrier;

use kusari::config;
use kusari::prelude::*;

/// More threads than cores, so that accumulations interleave.
fn threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (2 * cores).max(8)
}

/// Runs `body` on `n` threads released together by a barrier.
fn on_threads_at_once(n: usize, body: impl Fn() + Sync) {
    let start = Barrier::new(n);
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                start.wait();
                body();
            });
        }
    });
}

#[test]
fn concurrent_backward_into_one_leaf_loses_no_update() {
    let rounds = 1000;
    let n = threads();
    let x = Variable::new(Array::from_vec(vec![1.0f64], &[1]).unwrap());
    on_threads_at_once(n, || {
        for _ in 0..rounds {
            // d(2x)/dx = 2 per pass.
            (&x * 2.0).unwrap().backward().unwrap();
        }
    });
    let g = x.grad_array().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(
        g,
        vec![2.0 * (n * rounds) as f64],
        "{n} threads x {rounds} passes"
    );
}

#[test]
fn concurrent_backward_over_one_shared_graph_loses_no_update() {
    let rounds = 100;
    let n = threads();
    let x = Variable::new(Array::from_vec(vec![1.0f64, 2.0], &[2]).unwrap());
    // One graph, shared: y = sum(x * x + 3x), dy/dx = 2x + 3 = [5, 7].
    let y = F::sum(&((&x * &x).unwrap() + (&x * 3.0).unwrap()).unwrap()).unwrap();
    on_threads_at_once(n, || {
        for _ in 0..rounds {
            y.backward().unwrap();
        }
    });
    let passes = (n * rounds) as f64;
    let g = x.grad_array().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(g, vec![5.0 * passes, 7.0 * passes]);
}

/// The configuration a model of the guards predicts: the thread's defaults overlaid by each
/// live guard's change, in the order they were made.
fn expected(live: &[(u8, bool)]) -> (bool, bool) {
    let (mut train, mut backprop) = (true, true);
    for &(field, value) in live {
        if field == 0 {
            train = value;
        } else {
            backprop = value;
        }
    }
    (train, backprop)
}

#[test]
// `g = ...` drops the first guard by overwriting it: the mistake this test reproduces.
#[allow(unused_assignments)]
fn guards_dropped_out_of_order_restore_what_each_changed() {
    // The reported case: the first guard is dropped while the second lives.
    std::thread::spawn(|| {
        let mut g = config::no_backprop_mode();
        assert!(!config::enable_backprop());
        g = config::using_train(false);
        assert!(config::enable_backprop(), "the first guard is gone");
        assert!(!config::train(), "the second guard still lives");
        drop(g);
        assert!(config::enable_backprop() && config::train());
    })
    .join()
    .unwrap();

    // Every drop order of three guards, two of which change the same field.
    let changes: [(u8, bool); 3] = [(0, false), (1, false), (0, true)];
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        std::thread::spawn(move || {
            let mut guards: Vec<Option<config::ConfigGuard>> = changes
                .iter()
                .map(|&(field, value)| {
                    Some(if field == 0 {
                        config::using_train(value)
                    } else {
                        config::using_backprop(value)
                    })
                })
                .collect();
            let mut live: Vec<usize> = vec![0, 1, 2];
            for &i in &order {
                guards[i].take();
                live.retain(|&j| j != i);
                let model: Vec<(u8, bool)> = live.iter().map(|&j| changes[j]).collect();
                assert_eq!(
                    (config::train(), config::enable_backprop()),
                    expected(&model),
                    "drop order {order:?}, after dropping guard {i}"
                );
            }
            assert_eq!((config::train(), config::enable_backprop()), (true, true));
        })
        .join()
        .unwrap();
    }
}

/// Random stacks of up to eight guards over all four fields, dropped in random orders (and
/// nested again after partial drops), against the overlay model.
#[test]
fn random_guard_stacks_match_the_model() {
    std::thread::spawn(|| {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let defaults = config::current();
        let read = || {
            let c = config::current();
            [c.train, c.enable_backprop, c.debug, c.host_fallback]
        };
        // A guard's change: one field (0..4) to a value, or all fields (4) at once.
        let make = |field: u64, value: bool| match field {
            0 => config::using_train(value),
            1 => config::using_backprop(value),
            2 => config::using_debug(value),
            3 => config::using_host_fallback(value),
            _ => config::using_config(config::Config {
                train: value,
                enable_backprop: !value,
                debug: value,
                host_fallback: !value,
            }),
        };
        let model = |live: &[(u64, bool)]| {
            let mut v = [
                defaults.train,
                defaults.enable_backprop,
                defaults.debug,
                defaults.host_fallback,
            ];
            for &(field, value) in live {
                if field == 4 {
                    v = [value, !value, value, !value];
                } else {
                    v[field as usize] = value;
                }
            }
            v
        };
        for trial in 0..300 {
            let mut guards: Vec<(config::ConfigGuard, (u64, bool))> = Vec::new();
            for _ in 0..3 {
                for _ in 0..=next(4) {
                    let change = (next(5), next(2) == 1);
                    guards.push((make(change.0, change.1), change));
                    let live: Vec<_> = guards.iter().map(|g| g.1).collect();
                    assert_eq!(read(), model(&live), "trial {trial}: after a new guard");
                }
                for _ in 0..next(guards.len() as u64 + 1) {
                    let at = next(guards.len() as u64) as usize;
                    drop(guards.remove(at));
                    let live: Vec<_> = guards.iter().map(|g| g.1).collect();
                    assert_eq!(read(), model(&live), "trial {trial}: after dropping #{at}");
                }
            }
            while let Some(g) = guards.pop() {
                drop(g);
            }
            assert_eq!(read(), model(&[]), "trial {trial}: all dropped");
        }
    })
    .join()
    .unwrap();
}
