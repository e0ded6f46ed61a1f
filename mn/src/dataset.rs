//! Splitting a data set over the ranks (ChainerMN's `scatter_dataset` and `scatter_index`).

use kusari::random::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::communicator::Communicator;
use crate::error::Result;

/// This rank's share of the indices `0..n`: rank 0 orders them (shuffled with `seed` when it
/// is `Some`), pads them to a multiple of the number of ranks by repeating the first ones
/// (ChainerMN's `force_equal_length`), and sends each rank an equal, contiguous part. Every rank
/// gets `ceil(n / size)` indices, so every rank takes the same number of steps per epoch.
///
/// ```
/// use kusari_mn::{run_threads, scatter_index};
///
/// let parts = run_threads(3, "flat", |comm| scatter_index(&comm, 7, None));
/// let parts: Vec<Vec<usize>> = parts.into_iter().map(Result::unwrap).collect();
/// assert_eq!(parts, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 0, 1]]);
/// ```
pub fn scatter_index(comm: &Communicator, n: usize, seed: Option<u64>) -> Result<Vec<usize>> {
    let parts = (comm.rank() == 0).then(|| {
        let mut order: Vec<usize> = (0..n).collect();
        if let Some(seed) = seed {
            let mut rng = Rng::seed(seed);
            for i in (1..n).rev() {
                order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
        }
        let size = comm.size();
        let per_rank = n.div_ceil(size);
        let padded: Vec<usize> = (0..per_rank * size)
            .map(|i| if n == 0 { 0 } else { order[i % n] })
            .collect();
        padded
            .chunks(per_rank.max(1))
            .map(<[usize]>::to_vec)
            .chain(std::iter::repeat(Vec::new()))
            .take(size)
            .collect::<Vec<_>>()
    });
    comm.scatter_obj(parts.as_deref(), 0)
}

/// This rank's share of rank 0's `dataset` (the others pass `None`): the examples of
/// [`scatter_index`] with the same `seed`, sent from rank 0.
pub fn scatter_dataset<T: Serialize + DeserializeOwned + Clone>(
    comm: &Communicator,
    dataset: Option<&[T]>,
    seed: Option<u64>,
) -> Result<Vec<T>> {
    let n = comm.bcast_obj(dataset.map(<[T]>::len).as_ref(), 0)?;
    let index = scatter_index_all(comm, n, seed)?;
    let parts = match (comm.rank(), dataset) {
        (0, Some(data)) => Some(
            index
                .iter()
                .map(|part| part.iter().map(|&i| data[i].clone()).collect::<Vec<T>>())
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    comm.scatter_obj(parts.as_deref(), 0)
}

/// Every rank's part of [`scatter_index`], computed where it is needed (rank 0).
fn scatter_index_all(comm: &Communicator, n: usize, seed: Option<u64>) -> Result<Vec<Vec<usize>>> {
    let mine = scatter_index(comm, n, seed)?;
    Ok(comm.gather_obj(&mine, 0)?.unwrap_or_default())
}
