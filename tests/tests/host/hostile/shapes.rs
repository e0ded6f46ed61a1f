//! Shapes whose element count, strides or byte size overflow are errors wherever a shape is
//! made; a zero-element array with a huge axis still works; slicing steps at the ends of
//! `isize` count as in NumPy.

use kusari::random::Rng;
use kusari::{Array, DType, Error};

const HUGE: usize = (1 << 63) + 1;

fn assert_overflow(r: kusari::Result<Array>, op: &str) {
    match r {
        Err(e @ Error::ShapeOverflow { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(op), "{msg:?} should name {op}");
        }
        other => panic!("{op}: expected ShapeOverflow, got {other:?}"),
    }
}

#[test]
fn constructors_refuse_element_counts_that_wrap() {
    // [(1 << 63) + 1, 2] has 2^64 + 2 elements: the product wraps to 2, and the old code read a
    // two-element buffer through a view of that shape (a segfault from safe code).
    let shape = [HUGE, 2];
    assert_overflow(Array::zeros(&shape, DType::F32), "zeros");
    assert_overflow(Array::ones(&shape, DType::F64), "ones");
    assert_overflow(Array::full(&shape, 1.0, DType::I32), "full");
    let mut rng = Rng::seed(0);
    assert_overflow(
        Array::uniform(&shape, 0.0, 1.0, DType::F32, &mut rng),
        "uniform",
    );
    assert_overflow(
        Array::normal(&shape, 0.0, 1.0, DType::F32, &mut rng),
        "normal",
    );
    assert_overflow(Array::from_vec(vec![0.0f32; 2], &shape), "from_vec");
    // Counts that do not wrap but whose bytes exceed the address space.
    assert_overflow(Array::zeros(&[1 << 40, 1 << 40], DType::F32), "zeros");
    assert_overflow(Array::zeros(&[1 << 62], DType::F64), "zeros");
}

#[test]
fn views_refuse_shapes_that_wrap() {
    let a = Array::arange(0.0, 2.0, 1.0, DType::F32).unwrap();
    // The product of [(1 << 63) + 1, 2] wraps to 2, the size of `a`.
    assert_overflow(a.reshape(&[HUGE, 2]), "reshape");
    let one = Array::ones(&[1], DType::F32).unwrap();
    assert_overflow(one.broadcast_to(&[HUGE, 2]), "broadcast_to");
    // Two cheap broadcast views whose broadcast product overflows.
    let col = one
        .broadcast_to(&[1 << 40])
        .unwrap()
        .expand_dims(1)
        .unwrap();
    let row = one
        .broadcast_to(&[1 << 40])
        .unwrap()
        .expand_dims(0)
        .unwrap();
    assert_overflow(&col + &row, "add");
}

#[test]
fn arange_with_more_elements_than_addresses_is_an_error() {
    let r = Array::arange(0.0, 1e300, 1.0, DType::F64);
    assert!(
        matches!(r, Err(Error::ShapeOverflow { .. })),
        "arange(0, 1e300): {r:?}"
    );
}

#[test]
fn zero_element_arrays_with_huge_axes_still_work() {
    let a = Array::zeros(&[0, 1 << 62, 8], DType::F32).unwrap();
    assert_eq!((a.size(), a.shape()), (0, &[0, 1 << 62, 8][..]));
    let s = a.sum_axes(&[1], false).unwrap();
    assert_eq!(
        (s.shape(), s.to_vec::<f32>().unwrap()),
        (&[0, 8][..], vec![])
    );
    assert_eq!(a.t().sum().unwrap().item::<f32>().unwrap(), 0.0);
    assert_eq!(a.reshape(&[1 << 62, 0, 8]).unwrap().size(), 0);
    assert_eq!((&a + 1.0).unwrap().shape(), a.shape());
    // Summing the empty axis away leaves [1 << 62, 8] zeros: more than the address space.
    let r = a.sum_axes(&[0], false);
    assert!(matches!(r, Err(Error::ShapeOverflow { .. })), "{r:?}");
}

#[test]
fn slicing_with_extreme_steps_counts_as_numpy() {
    let a = Array::arange(0.0, 5.0, 1.0, DType::I64).unwrap();
    // NumPy: a[::sys.maxsize] == [0], a[::-sys.maxsize - 1] == [4].
    let fwd = a.slice_axis(0, 0, isize::MAX, isize::MAX).unwrap();
    assert_eq!(fwd.to_vec::<i64>().unwrap(), vec![0]);
    let back = a.slice_axis(0, -1, isize::MIN, isize::MIN).unwrap();
    assert_eq!(back.to_vec::<i64>().unwrap(), vec![4]);
    let back = a
        .slice_axis(0, isize::MAX, isize::MIN, -isize::MAX)
        .unwrap();
    assert_eq!(back.to_vec::<i64>().unwrap(), vec![4]);
    let none = a.slice_axis(0, 3, 1, isize::MAX).unwrap();
    assert_eq!(none.size(), 0);
    // An ordinary step beside them still takes every other element.
    let two = a.slice_axis(0, 0, isize::MAX, 2).unwrap();
    assert_eq!(two.to_vec::<i64>().unwrap(), vec![0, 2, 4]);
}
