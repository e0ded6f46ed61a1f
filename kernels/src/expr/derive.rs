//! Reverse-mode differentiation of a body: the gradients of its inputs from those of its
//! outputs, as a new body ([`derive`](fn@derive)) that is itself in the expression language, so it can be
//! derived again for higher orders.
//!
//! The body becomes a graph of values ([`super::graph`]); each value's adjoint (the gradient
//! reaching it) is summed from its users' in reverse order, by the rule of the operation
//! ([`rule`]), and the adjoints of the inputs are written out: a value the backward uses twice
//! is computed once into a local, and a value that is a forward output is read from the output
//! (which the op then retains) rather than computed again.

use std::collections::{HashMap, HashSet};

use super::ExprError;
use super::ast::{BinaryOp, Body, CType, Func, Stmt, TypeKind, UnaryOp};
use super::graph::{Graph, Node, NodeId};
use super::parse::Scope;

/// A derived backward: its body and the names it reads and assigns.
#[derive(Clone, Debug, PartialEq)]
pub struct Derivative {
    /// The backward body: assigns each of [`grad_inputs`](Self::grad_inputs).
    pub body: Body,
    /// The forward inputs it reads, in the forward signature's order.
    pub inputs_read: Vec<String>,
    /// The forward outputs it reads (which the op retains), in order.
    pub outputs_read: Vec<String>,
    /// The forward parameters it reads, in order.
    pub params_read: Vec<String>,
    /// The incoming gradient of each forward output, in the outputs' order (`grad_y` for `y`),
    /// whether read or not.
    pub grad_outputs: Vec<String>,
    /// The gradient assigned for each input differentiated, in the order asked (`grad_x`).
    pub grad_inputs: Vec<String>,
    /// The names the backward body may use (its inputs: the inputs and outputs read, then the
    /// incoming gradients; its outputs: the gradients of the inputs), so it can be derived
    /// again.
    pub scope: Scope,
}

/// The name of the gradient of `name`: `grad_<name>`, with more underscores while it clashes
/// with a name in `taken`.
fn grad_name(name: &str, taken: &HashSet<String>) -> String {
    let mut g = format!("grad_{name}");
    while taken.contains(&g) {
        g.insert(4, '_');
    }
    g
}

/// The backward of `body` (in `scope`) for the inputs `wrt`: each one's gradient, given the
/// gradients of every output, by reverse-mode differentiation. `value_type` is the type of the
/// locals the backward declares (the op's placeholder, `T`, or `float`).
///
/// Where a function is not differentiable at a point, the rule is Chainer's for the matching
/// function: `fabs`'s gradient is 0 at 0, `fmax(a, b)` sends the gradient to `a` where
/// `a > b` and to `b` elsewhere (ties to `b`, so `fmax(x, 0)` is `relu`, whose gradient at 0
/// is 0), `fmin(a, b)` to `a` where `a < b`; comparisons, `floor`, `ceil`, `round`, `trunc`,
/// casts to integer types and the condition of `?:` pass no gradient.
///
/// An input not in `scope` is an [`ExprError`] naming it.
///
/// ```
/// use kusari_kernels::expr::{derive, parse_body, Scope};
/// let scope = Scope {
///     inputs: vec!["x".into(), "y".into()],
///     outputs: vec!["z".into()],
///     placeholders: vec!['T'],
///     ..Scope::default()
/// };
/// let body = parse_body("z = exp(x) * y", &scope).unwrap();
/// let d = derive(&body, &scope, &["x", "y"], "T").unwrap();
/// // exp(x), which both gradients use, is computed once.
/// assert_eq!(
///     d.body.to_c(None),
///     "T _k0 = exp(x);\ngrad_x = _k0 * (y * grad_z);\ngrad_y = _k0 * grad_z;\n"
/// );
/// assert_eq!(d.inputs_read, ["x", "y"]);
/// // The derivative of exp(x) is its value: the output is read (and retained), not recomputed.
/// let body = parse_body("z = exp(x)", &scope).unwrap();
/// let d = derive(&body, &scope, &["x"], "T").unwrap();
/// assert_eq!(d.body.to_c(None), "grad_x = z * grad_z;\n");
/// assert_eq!(d.outputs_read, ["z"]);
/// ```
pub fn derive(
    body: &Body,
    scope: &Scope,
    wrt: &[&str],
    value_type: &str,
) -> Result<Derivative, ExprError> {
    if let Some(bad) = wrt.iter().find(|w| !scope.inputs.iter().any(|i| i == *w)) {
        return Err(ExprError::new(
            0..0,
            format!("`{bad}` is not an element input of the kernel, so it has no gradient"),
        ));
    }
    let mut g = Graph::default();
    for name in scope.inputs.iter().chain(&scope.params) {
        g.leaf(name);
    }
    let env = g.body(body);
    let forward_len = g.nodes.len();
    let taken: HashSet<String> = scope
        .inputs
        .iter()
        .chain(&scope.params)
        .chain(&scope.outputs)
        .chain(body.stmts.iter().map(|s| &s.target))
        .cloned()
        .collect();
    let grad_outputs: Vec<String> = scope.outputs.iter().map(|o| grad_name(o, &taken)).collect();
    let grad_inputs: Vec<String> = wrt.iter().map(|w| grad_name(w, &taken)).collect();

    // Adjoints, from the outputs back.
    let mut adjoint: HashMap<NodeId, NodeId> = HashMap::new();
    for (out, grad) in scope.outputs.iter().zip(&grad_outputs) {
        let y = env[out];
        let gy = g.leaf(grad);
        accumulate(&mut g, &mut adjoint, y, gy);
    }
    for id in (0..forward_len).rev().map(NodeId) {
        let Some(&gy) = adjoint.get(&id) else {
            continue;
        };
        for (operand, contribution) in rule(&mut g, id, gy) {
            accumulate(&mut g, &mut adjoint, operand, contribution);
        }
    }
    let zero = g.lit(0.0);
    let roots: Vec<NodeId> = wrt
        .iter()
        .map(|w| {
            let leaf = g.leaf(w);
            adjoint.get(&leaf).copied().unwrap_or(zero)
        })
        .collect();

    // Forward outputs the backward uses are read, not recomputed (unless they are an input
    // or a number as they are).
    let mut named: HashMap<NodeId, String> = HashMap::new();
    for out in &scope.outputs {
        let id = env[out];
        if !matches!(g.node(id), Node::Leaf(_) | Node::Lit(_)) {
            named.entry(id).or_insert_with(|| out.clone());
        }
    }
    // Uses of each node reachable from the roots (a named node is a leaf here).
    let mut uses: HashMap<NodeId, usize> = HashMap::new();
    let mut stack: Vec<NodeId> = roots.clone();
    let mut seen: HashSet<NodeId> = HashSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) || named.contains_key(&id) {
            continue;
        }
        for c in g.operands(id) {
            *uses.entry(c).or_default() += 1;
            stack.push(c);
        }
    }
    for r in &roots {
        *uses.entry(*r).or_default() += 1;
    }
    // Values used twice or more become locals, in the order they are made (operands first).
    let mut shared: Vec<NodeId> = uses
        .iter()
        .filter(|&(id, &n)| {
            n >= 2
                && !named.contains_key(id)
                && !matches!(
                    g.node(*id),
                    Node::Leaf(_) | Node::Lit(_) | Node::Unary(UnaryOp::Neg, _)
                )
        })
        .map(|(&id, _)| id)
        .collect();
    shared.sort();
    let local_type = CType {
        name: value_type.to_string(),
        kind: TypeKind::Float,
    };
    let mut stmts = Vec::new();
    let mut local_names: Vec<String> = Vec::new();
    for (k, id) in shared.iter().enumerate() {
        let mut name = format!("_k{k}");
        while taken.contains(&name) {
            name.insert(0, '_');
        }
        let value = g.to_expr(*id, &named);
        named.insert(*id, name.clone());
        local_names.push(name.clone());
        stmts.push(Stmt {
            target: name,
            local: Some(local_type.clone()),
            value,
            span: 0..0,
        });
    }
    for (grad, root) in grad_inputs.iter().zip(&roots) {
        stmts.push(Stmt {
            target: grad.clone(),
            local: None,
            value: g.to_expr(*root, &named),
            span: 0..0,
        });
    }
    let body = Body { stmts };

    // What the backward reads.
    let read = body.names_read();
    let keep = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|n| read.contains(*n))
            .cloned()
            .collect()
    };
    let inputs_read = keep(&scope.inputs);
    let outputs_read = keep(&scope.outputs);
    let params_read = keep(&scope.params);
    let scope = Scope {
        inputs: inputs_read
            .iter()
            .chain(&outputs_read)
            .chain(&grad_outputs)
            .cloned()
            .collect(),
        params: params_read.clone(),
        outputs: grad_inputs.clone(),
        raw: Vec::new(),
        placeholders: scope.placeholders.clone(),
    };
    Ok(Derivative {
        body,
        inputs_read,
        outputs_read,
        params_read,
        grad_outputs,
        grad_inputs,
        scope,
    })
}

fn accumulate(g: &mut Graph, adjoint: &mut HashMap<NodeId, NodeId>, id: NodeId, add: NodeId) {
    if g.value(add) == Some(0.0) || matches!(g.node(id), Node::Lit(_)) {
        return;
    }
    let sum = match adjoint.get(&id) {
        Some(&prev) => g.add(prev, add),
        None => add,
    };
    adjoint.insert(id, sum);
}

/// What the gradient `gy` of the node `id` contributes to each of its operands.
fn rule(g: &mut Graph, id: NodeId, gy: NodeId) -> Vec<(NodeId, NodeId)> {
    let node = g.node(id).clone();
    match node {
        Node::Lit(_) | Node::Leaf(_) => Vec::new(),
        Node::Unary(UnaryOp::Neg, a) => vec![(a, g.neg(gy))],
        Node::Unary(UnaryOp::Not, _) => Vec::new(),
        Node::Binary(op, a, b) => match op {
            BinaryOp::Add => vec![(a, gy), (b, gy)],
            BinaryOp::Sub => vec![(a, gy), (b, g.neg(gy))],
            BinaryOp::Mul => vec![(a, g.mul(gy, b)), (b, g.mul(gy, a))],
            BinaryOp::Div => {
                let ga = g.div(gy, b);
                // d(a/b)/db = -(a/b)/b.
                let q = g.div(id, b);
                let gb = g.mul(gy, q);
                vec![(a, ga), (b, g.neg(gb))]
            }
            _ => Vec::new(),
        },
        Node::Select(c, a, b) => {
            let zero = g.lit(0.0);
            vec![(a, g.select(c, gy, zero)), (b, g.select(c, zero, gy))]
        }
        Node::Cast(t, a) => match t.kind {
            TypeKind::Float => vec![(a, gy)],
            TypeKind::Integer => Vec::new(),
        },
        Node::Call(f, args) => call_rule(g, f, &args, id, gy),
    }
}

/// The derivative rules of the math functions (`s` is the node's own value).
fn call_rule(
    g: &mut Graph,
    f: Func,
    args: &[NodeId],
    s: NodeId,
    gy: NodeId,
) -> Vec<(NodeId, NodeId)> {
    use std::f64::consts::{LN_2, LN_10, PI};
    let x = args[0];
    let one = g.lit(1.0);
    // gy * d, for each operand's derivative d.
    let times = |g: &mut Graph, d: NodeId| g.mul(gy, d);
    let d = match f {
        Func::Exp => s,
        Func::Exp2 => {
            let ln2 = g.lit(LN_2);
            g.mul(s, ln2)
        }
        Func::Expm1 => g.add(s, one),
        Func::Log => g.div(one, x),
        Func::Log2 | Func::Log10 => {
            let ln = g.lit(if f == Func::Log2 { LN_2 } else { LN_10 });
            let xl = g.mul(x, ln);
            g.div(one, xl)
        }
        Func::Log1p => {
            let x1 = g.add(x, one);
            g.div(one, x1)
        }
        Func::Sqrt => {
            let two = g.lit(2.0);
            let s2 = g.mul(two, s);
            g.div(one, s2)
        }
        Func::Rsqrt => {
            // d x^(-1/2) = -1/2 x^(-3/2) = -0.5 * s / x.
            let half = g.lit(-0.5);
            let sx = g.div(s, x);
            g.mul(half, sx)
        }
        Func::Cbrt => {
            let three = g.lit(3.0);
            let x3 = g.mul(three, x);
            g.div(s, x3)
        }
        Func::Sin => g.call(Func::Cos, vec![x]),
        Func::Cos => {
            let sin = g.call(Func::Sin, vec![x]);
            g.neg(sin)
        }
        Func::Tan => {
            let s2 = g.mul(s, s);
            g.add(one, s2)
        }
        Func::Asin | Func::Acos => {
            let x2 = g.mul(x, x);
            let r = g.sub(one, x2);
            let d = g.call(Func::Rsqrt, vec![r]);
            if f == Func::Asin { d } else { g.neg(d) }
        }
        Func::Atan => {
            let x2 = g.mul(x, x);
            let r = g.add(one, x2);
            g.div(one, r)
        }
        Func::Atan2 => {
            // atan2(a, b): d/da = b / (a² + b²), d/db = -a / (a² + b²).
            let (a, b) = (args[0], args[1]);
            let a2 = g.mul(a, a);
            let b2 = g.mul(b, b);
            let r = g.add(a2, b2);
            let da = g.div(b, r);
            let db = g.div(a, r);
            let (ga, gb) = (times(g, da), times(g, db));
            return vec![(a, ga), (b, g.neg(gb))];
        }
        Func::Sinh => g.call(Func::Cosh, vec![x]),
        Func::Cosh => g.call(Func::Sinh, vec![x]),
        Func::Tanh => {
            let s2 = g.mul(s, s);
            g.sub(one, s2)
        }
        Func::Asinh | Func::Acosh => {
            let x2 = g.mul(x, x);
            let r = if f == Func::Asinh {
                g.add(x2, one)
            } else {
                g.sub(x2, one)
            };
            g.call(Func::Rsqrt, vec![r])
        }
        Func::Atanh => {
            let x2 = g.mul(x, x);
            let r = g.sub(one, x2);
            g.div(one, r)
        }
        Func::Pow => {
            // pow(a, b): d/da = b * pow(a, b - 1), d/db = s * log(a).
            let (a, b) = (args[0], args[1]);
            let b1 = g.sub(b, one);
            let p = g.call(Func::Pow, vec![a, b1]);
            let da = g.mul(b, p);
            let ga = times(g, da);
            if g.value(b).is_some() {
                return vec![(a, ga)];
            }
            let log = g.call(Func::Log, vec![a]);
            let db = g.mul(s, log);
            let gb = times(g, db);
            return vec![(a, ga), (b, gb)];
        }
        Func::Hypot => {
            let (a, b) = (args[0], args[1]);
            let da = g.div(a, s);
            let db = g.div(b, s);
            let (ga, gb) = (times(g, da), times(g, db));
            return vec![(a, ga), (b, gb)];
        }
        Func::Fabs => {
            // sign(x), 0 at 0 (Chainer's `absolute`).
            let zero = g.lit(0.0);
            let pos = g.binary(BinaryOp::Gt, x, zero);
            let neg = g.binary(BinaryOp::Lt, x, zero);
            let ngy = g.neg(gy);
            let inner = g.select(neg, ngy, zero);
            return vec![(x, g.select(pos, gy, inner))];
        }
        Func::Fmax | Func::Fmin => {
            let (a, b) = (args[0], args[1]);
            let op = if f == Func::Fmax {
                BinaryOp::Gt
            } else {
                BinaryOp::Lt
            };
            let to_a = g.binary(op, a, b);
            let zero = g.lit(0.0);
            return vec![(a, g.select(to_a, gy, zero)), (b, g.select(to_a, zero, gy))];
        }
        Func::Copysign => {
            let (a, b) = (args[0], args[1]);
            let sa = g.call(Func::Copysign, vec![one, a]);
            let sb = g.call(Func::Copysign, vec![one, b]);
            g.mul(sa, sb)
        }
        Func::Erf | Func::Erfc => {
            // 2/sqrt(pi) * exp(-x²).
            let x2 = g.mul(x, x);
            let nx2 = g.neg(x2);
            let e = g.call(Func::Exp, vec![nx2]);
            let k = g.lit(if f == Func::Erf { 2.0 } else { -2.0 } / PI.sqrt());
            g.mul(k, e)
        }
        Func::Floor | Func::Ceil | Func::Round | Func::Trunc => return Vec::new(),
    };
    vec![(x, times(g, d))]
}

impl Body {
    /// Every name the body reads before assigning it (its inputs and parameters as used).
    pub fn names_read(&self) -> HashSet<String> {
        let mut read = HashSet::new();
        let mut assigned: HashSet<&str> = HashSet::new();
        for s in &self.stmts {
            s.value.vars(&mut |n| {
                if !assigned.contains(n) {
                    read.insert(n.to_string());
                }
            });
            assigned.insert(&s.target);
        }
        read
    }
}

impl super::ast::Expr {
    /// Calls `f` with every name the expression reads.
    pub(crate) fn vars(&self, f: &mut impl FnMut(&str)) {
        use super::ast::Expr;
        match self {
            Expr::Lit(_) => {}
            Expr::Var(n) => f(n),
            Expr::Unary(_, a) | Expr::Cast(_, a) => a.vars(f),
            Expr::Binary(_, a, b) => {
                a.vars(f);
                b.vars(f);
            }
            Expr::Select(c, a, b) => {
                c.vars(f);
                a.vars(f);
                b.vars(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.vars(f)),
        }
    }
}
