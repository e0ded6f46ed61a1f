//! The expression language of bodies against numbers worked out independently: each derived
//! backward (and the backward of that backward) equals central finite differences of the
//! forward body evaluated in `f64`, over ops that span the language (the tutorial's MulAdd and
//! ExpAdd, swish, softplus, gelu with `erf`, a clipped log, elu by `?:`, two outputs sharing a
//! local, compound assignments, every math function); the backward reads the forward outputs
//! it can instead of recomputing them and shares what it uses twice; and every construct outside
//! the language is an error naming it at its text. With NVRTC, every derived body compiles as
//! an elementwise kernel in float32 and float64.

use std::collections::HashMap;

use kusari_kernels::expr::{Body, Derivative, Program, Scope, derive, erf, parse_body};

/// An op written as a body: its names, its body, and the interval its inputs are drawn from
/// (away from any kink of the functions it uses).
struct Op {
    inputs: &'static [&'static str],
    params: &'static [(&'static str, f64)],
    outputs: &'static [&'static str],
    body: &'static str,
    domain: (f64, f64),
}

const OPS: &[Op] = &[
    Op {
        inputs: &["x", "y", "z"],
        params: &[],
        outputs: &["w"],
        body: "w = x * y + z;",
        domain: (-2.0, 2.0),
    },
    Op {
        inputs: &["x", "y"],
        params: &[],
        outputs: &["z"],
        body: "z = exp(x) + exp(y)",
        domain: (-2.0, 2.0),
    },
    // swish, with beta an input as Chainer's has it.
    Op {
        inputs: &["x", "beta"],
        params: &[],
        outputs: &["y"],
        body: "y = x / (1 + exp(-beta * x));",
        domain: (-2.0, 2.0),
    },
    // softplus, beta a scalar parameter.
    Op {
        inputs: &["x"],
        params: &[("beta", 1.5)],
        outputs: &["y"],
        body: "y = log1p(exp(beta * x)) / beta;",
        domain: (-3.0, 3.0),
    },
    // gelu, the exact form.
    Op {
        inputs: &["x"],
        params: &[],
        outputs: &["y"],
        body: "y = 0.5 * x * (1 + erf(x * 0.7071067811865476));",
        domain: (-2.5, 2.5),
    },
    // A clipped log: x stays above eps here.
    Op {
        inputs: &["x"],
        params: &[("eps", 0.1)],
        outputs: &["y"],
        body: "y = log(fmax(x, eps));",
        domain: (0.2, 3.0),
    },
    // elu, by a condition (points away from 0 are drawn, see `kink_free`).
    Op {
        inputs: &["x"],
        params: &[("alpha", 0.7)],
        outputs: &["y"],
        body: "y = x > 0 ? x : alpha * (exp(x) - 1);",
        domain: (-2.0, 2.0),
    },
    // Two outputs sharing a local.
    Op {
        inputs: &["x", "y"],
        params: &[],
        outputs: &["s", "d"],
        body: "T t = x * y;\ns = t + sin(t);\nd = t / (1 + x * x);",
        domain: (-1.5, 1.5),
    },
    // Compound assignments, an output read after it is assigned.
    Op {
        inputs: &["x", "y"],
        params: &[],
        outputs: &["z"],
        body: "z = x; z *= y; z += exp(z); z /= 2",
        domain: (-1.0, 1.0),
    },
    Op {
        inputs: &["x", "z"],
        params: &[],
        outputs: &["y"],
        body: "y = atan2(x, z) + hypot(x, z) + pow(x, z) + tanh(x) * cosh(z) - sinh(x) / z",
        domain: (0.5, 2.0),
    },
    Op {
        inputs: &["x"],
        params: &[],
        outputs: &["y"],
        body: "y = sqrt(x) + rsqrt(x) + cbrt(x) + log2(x) + log10(x) + exp2(x) + expm1(x) \
               + asinh(x) + atan(x) + erfc(x) + tan(x) + cos(x) + log(x)",
        domain: (0.3, 0.9),
    },
    Op {
        inputs: &["x"],
        params: &[],
        outputs: &["y"],
        body: "y = asin(x) + acos(0.5f * x) + atanh(x * 0.5) + acosh(x + 1.5) + copysign(x, -1.0) \
               + fabs(x - 2) + fminf(x, 0.95) + floor(x * 3) + (float)x + (int)(x * 10) \
               + ceil(x) + round(x) + trunc(x) + pow(x, 3)",
        domain: (0.3, 0.9),
    },
];

fn scope(op: &Op) -> Scope {
    Scope {
        inputs: op.inputs.iter().map(|s| s.to_string()).collect(),
        params: op.params.iter().map(|(s, _)| s.to_string()).collect(),
        outputs: op.outputs.iter().map(|s| s.to_string()).collect(),
        raw: Vec::new(),
        placeholders: vec!['T'],
    }
}

/// A small deterministic generator (xorshift), values in `[lo, hi)`.
struct Rng(u64);

impl Rng {
    fn next(&mut self, (lo, hi): (f64, f64)) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn run(body: &Body, args: &HashMap<String, f64>) -> HashMap<String, f64> {
    let args: Vec<(&str, f64)> = args.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    body.eval(&args).unwrap()
}

/// Checks `d`, the backward of `body` (names in `scope`), at `point` against central finite
/// differences of `L = Σ gy · y` over the inputs, for random incoming gradients.
fn check_against_differences(
    what: &str,
    body: &Body,
    scope: &Scope,
    d: &Derivative,
    point: &HashMap<String, f64>,
    rng: &mut Rng,
) {
    let forward = run(body, point);
    let gys: Vec<f64> = scope
        .outputs
        .iter()
        .map(|_| rng.next((-1.0, 1.0)))
        .collect();
    let loss = |p: &HashMap<String, f64>| -> f64 {
        let out = run(body, p);
        scope
            .outputs
            .iter()
            .zip(&gys)
            .map(|(o, g)| g * out[o])
            .sum()
    };
    let mut args = point.clone();
    for o in &scope.outputs {
        args.insert(o.clone(), forward[o]);
    }
    for (g, v) in d.grad_outputs.iter().zip(&gys) {
        args.insert(g.clone(), *v);
    }
    let backward = run(&d.body, &args);
    for (input, grad) in scope.inputs.iter().zip(&d.grad_inputs) {
        let x = point[input];
        let h = 1e-6 * x.abs().max(1.0);
        let mut plus = point.clone();
        plus.insert(input.clone(), x + h);
        let mut minus = point.clone();
        minus.insert(input.clone(), x - h);
        let fd = (loss(&plus) - loss(&minus)) / (2.0 * h);
        let got = backward[grad];
        assert!(
            (got - fd).abs() <= 2e-6 * fd.abs().max(1.0),
            "{what}: d/d{input} at {point:?} is {got}, finite differences say {fd}\n{}",
            d.body.to_c(None)
        );
    }
}

#[test]
fn derived_backwards_match_finite_differences_to_second_order() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for op in OPS {
        let scope = scope(op);
        let body = parse_body(op.body, &scope).unwrap_or_else(|e| panic!("{}", e.render(op.body)));
        let d = derive(&body, &scope, op.inputs, "T").unwrap();
        // The backward of the backward, over everything it reads.
        let dd_wrt: Vec<&str> = d.scope.inputs.iter().map(String::as_str).collect();
        let dd = derive(&d.body, &d.scope, &dd_wrt, "T").unwrap();
        let mut checked = 0;
        while checked < 8 {
            let mut point: HashMap<String, f64> = HashMap::new();
            for i in op.inputs {
                point.insert(i.to_string(), rng.next(op.domain));
            }
            for (p, v) in op.params {
                point.insert(p.to_string(), *v);
            }
            if !kink_free(op, &point) {
                continue;
            }
            check_against_differences(op.body, &body, &scope, &d, &point, &mut rng);
            // Second order: the backward body is a body whose inputs are the forward inputs
            // and outputs it reads and the incoming gradients.
            let forward = run(&body, &point);
            let mut bpoint = point.clone();
            for o in &d.outputs_read {
                bpoint.insert(o.clone(), forward[o]);
            }
            for g in &d.grad_outputs {
                bpoint.insert(g.clone(), rng.next((-1.0, 1.0)));
            }
            bpoint.retain(|k, _| d.scope.inputs.contains(k) || d.scope.params.contains(k));
            check_against_differences(
                &format!("the backward of {}", op.body),
                &d.body,
                &d.scope,
                &dd,
                &bpoint,
                &mut rng,
            );
            checked += 1;
        }
    }
}

/// Whether `point` is away from the kinks of `op` (finite differences across one are not the
/// derivative): 0 for elu, the integers for floor, ceil, round, trunc and the int cast.
fn kink_free(op: &Op, point: &HashMap<String, f64>) -> bool {
    let x = point.get("x").copied().unwrap_or(1.0);
    let near = |v: f64| (v - v.round()).abs() < 1e-3;
    if op.body.contains("floor") {
        return !near(x * 3.0) && !near(x * 10.0) && !near(x - 0.5) && (x - 0.95).abs() > 1e-3;
    }
    x.abs() > 1e-3
}

/// The straight-line program of every body here (and of its backward) computes what the body
/// does, to the bit, with fewer instructions than the body has operations where it shares.
#[test]
fn programs_compute_what_their_bodies_do() {
    let mut rng = Rng(7);
    for op in OPS {
        let scope = scope(op);
        let body = parse_body(op.body, &scope).unwrap();
        let d = derive(&body, &scope, op.inputs, "T").unwrap();
        for (body, scope) in [(&body, &scope), (&d.body, &d.scope)] {
            let program = Program::lower(body, scope);
            for _ in 0..4 {
                let inputs: Vec<f64> = scope.inputs.iter().map(|_| rng.next(op.domain)).collect();
                let params: Vec<f64> = op.params.iter().map(|(_, v)| *v).collect();
                let mut args: HashMap<String, f64> = HashMap::new();
                for (n, v) in scope
                    .inputs
                    .iter()
                    .zip(&inputs)
                    .chain(scope.params.iter().zip(&params))
                {
                    args.insert(n.clone(), *v);
                }
                let want = run(body, &args);
                let got = program.eval(&inputs, &params);
                for (o, g) in scope.outputs.iter().zip(&got) {
                    assert_eq!(g.to_bits(), want[o].to_bits(), "{}: {o}", op.body);
                }
            }
        }
    }
    // exp(x) twice is one instruction.
    let s = Scope {
        inputs: vec!["x".into()],
        outputs: vec!["y".into()],
        placeholders: vec!['T'],
        ..Scope::default()
    };
    let p = Program::lower(
        &parse_body("y = exp(x) + exp(x) * 2; T dead = log(x)", &s).unwrap(),
        &s,
    );
    assert_eq!(p.instrs.len(), 5, "{p:?}");
}

#[test]
fn the_backward_reads_retained_outputs_and_shares_what_it_uses_twice() {
    let s = Scope {
        inputs: vec!["x".into()],
        outputs: vec!["y".into()],
        placeholders: vec!['T'],
        ..Scope::default()
    };
    // exp's derivative is its value: the output, read, not computed again.
    let d = derive(&parse_body("y = exp(x)", &s).unwrap(), &s, &["x"], "T").unwrap();
    assert_eq!(d.body.to_c(None), "grad_x = y * grad_y;\n");
    assert_eq!((d.inputs_read.len(), d.outputs_read.len()), (0, 1));
    // tanh's too (1 - y²), and sigmoid written out reads y.
    let d = derive(&parse_body("y = tanh(x)", &s).unwrap(), &s, &["x"], "T").unwrap();
    assert_eq!(d.body.to_c(None), "grad_x = grad_y * (1 - y * y);\n");
    // exp(x) used twice in the backward of exp(x)² is computed once.
    let d = derive(
        &parse_body("y = exp(2 * x) + exp(x) * exp(x)", &s).unwrap(),
        &s,
        &["x"],
        "T",
    )
    .unwrap();
    let c = d.body.to_c(Some("T"));
    assert_eq!(c.matches("exp(x)").count(), 1, "{c}");
    assert!(c.starts_with("T _k0 = "), "{c}");
    // A local the forward declares is not retained: the backward computes what it needs.
    let d = derive(
        &parse_body("T e = exp(-x); y = 1 / (1 + e)", &s).unwrap(),
        &s,
        &["x"],
        "T",
    )
    .unwrap();
    assert!(d.body.names_read().contains("x"));
    // Nothing reaches an input that does not affect the output: a gradient of 0.
    let s2 = Scope {
        inputs: vec!["x".into(), "unused".into()],
        ..s.clone()
    };
    let d = derive(
        &parse_body("y = 2 * x", &s2).unwrap(),
        &s2,
        &["x", "unused"],
        "T",
    )
    .unwrap();
    assert_eq!(
        d.body.to_c(None),
        "grad_x = 2 * grad_y;\ngrad_unused = 0;\n"
    );
    // Gradient names do not clash with the kernel's.
    let s3 = Scope {
        inputs: vec!["x".into(), "grad_x".into()],
        ..s
    };
    let d = derive(
        &parse_body("y = x * grad_x", &s3).unwrap(),
        &s3,
        &["x"],
        "T",
    )
    .unwrap();
    assert_eq!(d.grad_inputs, ["grad__x"]);
    assert!(derive(&parse_body("y = x", &s3).unwrap(), &s3, &["q"], "T").is_err());
}

#[test]
fn literals_and_precedence_survive_writing_the_body_back() {
    let s = Scope {
        inputs: vec!["a".into(), "b".into(), "c".into()],
        outputs: vec!["y".into()],
        placeholders: vec!['T'],
        ..Scope::default()
    };
    for src in [
        "y = a - (b - c) - -a / (b * c) + -(a + b)",
        "y = (a < b) == (b < c) ? (a > 0 && b > 0 || c > 0) : !(a == 2.5e-3)",
        "y = (unsigned int)a + T(b) * (float)(a - b) + 0.1 + 1e300 + 3",
        "y = a; y -= b; y /= c",
    ] {
        let body = parse_body(src, &s).unwrap();
        let c = body.to_c(None);
        let again = parse_body(&c, &s).unwrap();
        assert_eq!(again.to_c(None), c, "{src}");
        let args = [("a", 1.25), ("b", -0.5), ("c", 3.0)];
        assert_eq!(
            body.eval(&args).unwrap()["y"].to_bits(),
            again.eval(&args).unwrap()["y"].to_bits(),
            "{src} -> {c}"
        );
    }
    // Hand-computed: 1.25 - (-0.5 - 3) - (-1.25 / -1.5) + -(0.75).
    let body = parse_body("y = a - (b - c) - -a / (b * c) + -(a + b)", &s).unwrap();
    let want = 1.25 - (-0.5 - 3.0) - (-1.25 / (-0.5 * 3.0)) - (1.25 - 0.5);
    assert_eq!(
        body.eval(&[("a", 1.25), ("b", -0.5), ("c", 3.0)]).unwrap()["y"],
        want
    );
    // A non-integer literal keeps a float kernel in float when asked.
    let body = parse_body("y = 0.5 * a + 2", &s).unwrap();
    assert_eq!(body.to_c(Some("T")), "y = T(0.5) * a + 2;\n");
}

#[test]
fn constructs_outside_the_language_are_named_at_their_text() {
    let s = Scope {
        inputs: vec!["x".into()],
        params: vec!["k".into()],
        outputs: vec!["y".into()],
        raw: vec!["table".into()],
        placeholders: vec!['T'],
    };
    let cases: &[(&str, &str, &str)] = &[
        ("y = x[0];", "indexing (`[`)", "["),
        ("if (x > 0) y = x;", "a branch (`if`)", "if"),
        (
            "for (;;) y = x;",
            "a loop (`for`) cannot be differentiated",
            "for",
        ),
        (
            "y = x; while (y > 1) y = y / 2;",
            "a loop (`while`)",
            "while",
        ),
        (
            "y = sigmoid(x);",
            "`sigmoid` is not a function of the expression language",
            "sigmoid",
        ),
        ("y = pow(x);", "`pow` takes 2 argument(s), not 1", "pow"),
        ("y = q * x;", "`q` is not an input, a parameter", "q"),
        ("y = table * 2;", "`table` is a raw array", "table"),
        ("y = x * i;", "`i`, the element's index", "i"),
        ("x = 2; y = x;", "`x` is an input of the kernel", "x"),
        (
            "y = y + x;",
            "the output `y` is read before it is assigned",
            "y",
        ),
        ("y += x;", "`y` is read by `+=` before it is assigned", "y"),
        (
            "T t = x; T t = 2 * x; y = t;",
            "the local `t` is declared twice",
            "t",
        ),
        (
            "T x = 1; y = x;",
            "the local `x` has the name of an argument",
            "x",
        ),
        ("T t = x;", "the output `y` is never assigned", ""),
        ("y = x % 2;", "the remainder `%`", "%"),
        ("y = x & 1;", "a bitwise and", "&"),
        ("y = x | 1;", "a bitwise operator", "|"),
        ("y = atomicAdd(x, 1);", "an atomic operation", "atomicAdd"),
        ("y = \"x\";", "a string or character literal", "\""),
        ("y = x; { y = 2; }", "a block (`{`)", "{"),
        ("exp(x); y = x;", "a call on its own does nothing", "exp"),
        ("y = (x + 1;", "expected `)` closing `(`, found `;`", ";"),
        ("y = x ? 1;", "expected `:` in `c ? a : b`", ";"),
        (
            "y = x y;",
            "expected `;` after the statement, found `y`",
            "y",
        ),
        (
            "y = 1.5.2;",
            "a number this language does not read",
            "1.5.2",
        ),
        (
            "y = x; /* never closed",
            "a `/*` comment is never closed",
            "/*",
        ),
        ("#pragma unroll\ny = x;", "a preprocessor directive", "#"),
    ];
    for (src, message, at) in cases {
        let e = parse_body(src, &s).expect_err(src);
        assert!(e.message.contains(message), "{src}: {}", e.message);
        assert_eq!(&src[e.span.clone()], *at, "{src}: {}", e.message);
    }
    // What is in the language parses, with `//` comments, CUDA's `f` names, `true`, a
    // declared `const` local, and a parameter.
    let body = parse_body(
        "// a comment\nconst float half_x = 0.5f * x; y = expf(half_x) * k + true;",
        &s,
    )
    .unwrap();
    assert_eq!(body.stmts.len(), 2);
    assert_eq!(
        body.eval(&[("x", 2.0), ("k", 3.0)]).unwrap()["y"],
        1f64.exp() * 3.0 + 1.0
    );
}

#[test]
fn erf_matches_known_values() {
    // Values from the closed forms' tables (Abramowitz & Stegun 7.1, to 16 digits).
    for (x, want) in [
        (0.0, 0.0),
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (3.5, 0.999_999_256_901_627_7),
        (-1.0, -0.842_700_792_949_714_9),
    ] {
        assert!(
            (erf(x) - want).abs() < 2e-15,
            "erf({x}) = {}, want {want}",
            erf(x)
        );
    }
}

/// Every derived backward here compiles as an elementwise kernel (float32 and float64).
#[cfg(feature = "nvrtc")]
#[test]
fn every_derived_backward_compiles_with_nvrtc() {
    use kusari_kernels::ElementwiseSignature;
    use kusari_kernels::ScalarType;
    use kusari_kernels::codegen::{IndexWidth, Indexing, generate};
    use kusari_kernels::compile::compile_ptx;
    if !super::nvrtc::nvrtc_or_skip("every_derived_backward_compiles_with_nvrtc") {
        return;
    }
    for op in OPS {
        let scope = scope(op);
        let body = parse_body(op.body, &scope).unwrap();
        let d = derive(&body, &scope, op.inputs, "T").unwrap();
        let list = |names: &[String]| -> String {
            names
                .iter()
                .map(|n| format!("T {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sig = ElementwiseSignature::new(
            &list(&d.scope.inputs),
            &list(&d.scope.outputs),
            &list(&d.scope.params),
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}", op.body));
        for t in [ScalarType::Float32, ScalarType::Float64] {
            let src = generate(
                "derived_backward",
                &sig,
                &d.body.to_c(Some("T")),
                &[('T', t)],
                Indexing::Contiguous,
                IndexWidth::I32,
            )
            .unwrap();
            compile_ptx(&src, "compute_80").unwrap_or_else(|e| panic!("{} ({t}): {e}", op.body));
        }
    }
}
