//! Arrays to and from the GPU: every dtype and view, and new arrays made there.

use super::*;

#[test]
fn every_dtype_and_view_round_trips() {
    let Some(dev) = gpu("every_dtype_and_view_round_trips") else {
        return;
    };
    let _suite = shared();
    let views: [(&str, View); 6] = [
        ("t()", transposed),
        ("flip(0)", flipped0),
        ("flip(1)", flipped1),
        ("slice_axis(1, 1, 4, 2)", |a| a.slice_axis(1, 1, 4, 2)),
        ("slice_axis(0, 2, -4, -1)", |a| a.slice_axis(0, 2, -4, -1)),
        ("rows 1..3", |a| a.slice_axis(0, 1, 3, 1)),
    ];
    for (k, dtype) in DType::ALL.into_iter().enumerate() {
        let h = values(&[3, 4], dtype, 1 + k as u64);
        let g = on(dev, &h);
        let what = format!("{dtype} [3, 4]");
        assert_eq!(g.device(), dev, "{what}");
        assert_eq!(g.dtype(), dtype, "{what}");
        assert!(g.is_contiguous(), "{what}");
        close(&g, &h, EXACT, &what);
        let back = g.to_device(Device::Cpu).unwrap();
        assert_eq!(back.device(), Device::Cpu);
        close(&back, &h, EXACT, &format!("{what} back on the host"));

        // Views of a GPU array, read in place or copied.
        for (name, view) in views {
            let what = format!("{dtype} {name}");
            let (gv, hv) = (view(&g).unwrap(), view(&h).unwrap());
            assert_eq!(gv.device(), dev, "{what}");
            close(&gv, &hv, EXACT, &what);
            let c = gv.contiguous().unwrap();
            assert!(c.is_contiguous() && c.device() == dev, "{what}");
            close(&c, &hv, EXACT, &format!("{what}.contiguous()"));
            let back = gv.to_device(Device::Cpu).unwrap();
            close(&back, &hv, EXACT, &format!("{what} to the host"));
            // A host view is uploaded as a C-contiguous copy.
            let up = hv.to_device(dev).unwrap();
            assert!(up.is_contiguous(), "{what} uploaded");
            close(&up, &hv, EXACT, &format!("{what} uploaded"));
        }

        // Zero-size, 0-d and one-element arrays.
        for shape in [&[0, 3][..], &[3, 0], &[], &[1], &[2, 0, 2]] {
            let h = values(shape, dtype, 9);
            let g = on(dev, &h);
            assert_eq!(g.shape(), shape);
            close(&g, &h, EXACT, &format!("{dtype} {shape:?}"));
            close(
                &g.to_device(Device::Cpu).unwrap(),
                &h,
                EXACT,
                &format!("{dtype} {shape:?} back"),
            );
        }

        // To the device it is on: the same buffer.
        let again = g.to_device(dev).unwrap();
        assert!(again.shares_buffer(&g), "{dtype}: cuda:0 to cuda:0 copies");
        assert!(!back.shares_buffer(&g));
    }

    // Typed reads copy back; the wrong type is an error, not garbage.
    let h = values(&[2, 3], DType::F32, 3);
    let g = on(dev, &h);
    assert_eq!(g.to_vec::<f32>().unwrap(), h.to_vec::<f32>().unwrap());
    assert_eq!(
        g.to_ndarray::<f32>().unwrap(),
        h.to_ndarray::<f32>().unwrap()
    );
    assert!(matches!(g.to_vec::<f64>(), Err(Error::ElementType { .. })));
    let b = on(dev, &values(&[5], DType::Bool, 4));
    assert_eq!(
        b.to_vec::<bool>().unwrap(),
        values(&[5], DType::Bool, 4).to_vec::<bool>().unwrap()
    );
    let i = on(dev, &values(&[5], DType::I64, 5));
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        values(&[5], DType::I64, 5).to_vec::<i64>().unwrap()
    );
    assert_eq!(on(dev, &Array::scalar(2.5f64)).item::<f64>().unwrap(), 2.5);
}

#[test]
fn full_and_zeros_on_the_gpu() {
    let Some(dev) = gpu("full_and_zeros_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in DType::ALL {
        for value in [0.0, 1.0, 2.5, -3.0] {
            for shape in [&[2, 3][..], &[], &[0, 2], &[700, 30]] {
                let g = Array::full_on(shape, value, dtype, dev).unwrap();
                let what = format!("full_on({shape:?}, {value}, {dtype})");
                assert_eq!(g.device(), dev, "{what}");
                close(&g, &Array::full(shape, value, dtype).unwrap(), EXACT, &what);
            }
        }
        // -0.0 keeps its sign (all-zero bytes would be +0.0), as on the host.
        if dtype.is_float() {
            let g = Array::full_on(&[3], -0.0, dtype, dev).unwrap();
            let bits = g.to_f64_vec().unwrap();
            let host = Array::full(&[3], -0.0, dtype)
                .unwrap()
                .to_f64_vec()
                .unwrap();
            assert!(host.iter().all(|v| *v == 0.0 && v.is_sign_negative()));
            assert!(
                bits.iter().all(|v| *v == 0.0 && v.is_sign_negative()),
                "full_on(-0.0, {dtype}) gave {bits:?}"
            );
        }
        let z = Array::zeros_on(&[4, 5], dtype, dev).unwrap();
        assert_eq!(z.device(), dev);
        close(
            &z,
            &Array::zeros(&[4, 5], dtype).unwrap(),
            EXACT,
            "zeros_on",
        );
        let g = on(dev, &values(&[2, 3], dtype, 1));
        for (name, like, value) in [
            ("zeros_like", g.zeros_like().unwrap(), 0.0),
            ("ones_like", g.ones_like().unwrap(), 1.0),
            ("full_like", g.full_like(-2.0).unwrap(), -2.0),
        ] {
            assert_eq!(like.device(), dev, "{name}");
            close(
                &like,
                &Array::full(&[2, 3], value, dtype).unwrap(),
                EXACT,
                &format!("{dtype} {name}"),
            );
        }
    }
}

/// Indexing, joining, splitting and padding copy elements: on the GPU they give the host's
/// elements bit for bit, in every dtype and from strided views.
#[test]
fn indexing_and_joining_give_the_hosts_elements_in_every_dtype() {
    let Some(dev) = gpu("indexing_and_joining_give_the_hosts_elements_in_every_dtype") else {
        return;
    };
    let _suite = shared();
    type Op = fn(&Array, &Array) -> Result<Array>;
    let ops: [(&str, Op); 7] = [
        ("x[idx, ::-2]", |a, i| {
            a.get_item(&[Ix::Array(i), Ix::slice(None, None, -2)])
        }),
        ("x.t()[1:, idx]", |a, i| {
            a.t().get_item(&[Ix::range(1, 4), Ix::Array(i)])
        }),
        ("x[None, -1, ...]", |a, _| {
            a.get_item(&[Ix::NewAxis, Ix::Int(-1), Ix::Ellipsis])?
                .contiguous()
        }),
        ("concat", |a, _| Array::concat(&[&a.flip(0)?, a], 0)),
        ("stack", |a, _| Array::stack(&[a, &a.flip(1)?], 2)),
        ("split_axis", |a, _| a.split_axis(&[1], 1)?[1].contiguous()),
        ("pad", |a, _| a.t().pad(&[(1, 0), (2, 1)], "constant", 1.0)),
    ];
    let idx = Array::from_vec(vec![2i64, 0, -1, 2], &[2, 2]).unwrap();
    for (k, dtype) in DType::ALL.into_iter().enumerate() {
        let h = values(&[3, 4], dtype, 40 + k as u64);
        let d = h.to_device(dev).unwrap();
        let di = idx.to_device(dev).unwrap();
        for (name, op) in ops {
            let want = op(&h, &idx).unwrap_or_else(|e| panic!("{name} {dtype} on the host: {e}"));
            let got = op(&d, &di).unwrap_or_else(|e| panic!("{name} {dtype} on {dev}: {e}"));
            assert_eq!(got.device(), dev, "{name} {dtype}");
            assert_eq!(got.shape(), want.shape(), "{name} {dtype}");
            let bits = |a: &Array| -> Vec<u64> {
                a.to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            assert_eq!(bits(&got), bits(&want), "{name} {dtype}");
        }
    }
}
