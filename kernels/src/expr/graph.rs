//! A body as a graph of values (hash-consed, so an expression computed twice is one node), with
//! the algebra that keeps derivatives small: constants folded, `x + 0`, `x * 1`, `x * 0`,
//! `--x`, `c ? a : a` simplified, and the operands of `+` and `*` ordered so that `a * b` and
//! `b * a` are one node.

use std::collections::HashMap;

use super::ast::{BinaryOp, Body, CType, Expr, Func, TypeKind, UnaryOp};
use super::eval::call;

/// A node's index; nodes are numbered in the order they are made, so a node's operands always
/// have smaller numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct NodeId(pub usize);

/// A value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    /// A number (its bits).
    Lit(u64),
    /// A named value: an input, a parameter, an incoming gradient.
    Leaf(String),
    Unary(UnaryOp, NodeId),
    Binary(BinaryOp, NodeId, NodeId),
    Select(NodeId, NodeId, NodeId),
    Call(Func, Vec<NodeId>),
    Cast(CType, NodeId),
}

#[derive(Default)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    index: HashMap<Node, NodeId>,
}

impl Graph {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    fn intern(&mut self, n: Node) -> NodeId {
        if let Some(&id) = self.index.get(&n) {
            return id;
        }
        let id = NodeId(self.nodes.len());
        self.nodes.push(n.clone());
        self.index.insert(n, id);
        id
    }

    pub fn value(&self, id: NodeId) -> Option<f64> {
        match self.node(id) {
            Node::Lit(bits) => Some(f64::from_bits(*bits)),
            _ => None,
        }
    }

    fn is(&self, id: NodeId, v: f64) -> bool {
        self.value(id) == Some(v)
    }

    pub fn lit(&mut self, v: f64) -> NodeId {
        // One zero: `-0.0` and `0.0` are one node.
        let v = if v == 0.0 { 0.0 } else { v };
        self.intern(Node::Lit(v.to_bits()))
    }

    pub fn leaf(&mut self, name: &str) -> NodeId {
        self.intern(Node::Leaf(name.to_string()))
    }

    pub fn neg(&mut self, a: NodeId) -> NodeId {
        if let Some(v) = self.value(a) {
            return self.lit(-v);
        }
        if let Node::Unary(UnaryOp::Neg, inner) = *self.node(a) {
            return inner;
        }
        self.intern(Node::Unary(UnaryOp::Neg, a))
    }

    fn negated(&self, a: NodeId) -> Option<NodeId> {
        match *self.node(a) {
            Node::Unary(UnaryOp::Neg, inner) => Some(inner),
            _ => None,
        }
    }

    pub fn not(&mut self, a: NodeId) -> NodeId {
        if let Some(v) = self.value(a) {
            return self.lit(f64::from(v == 0.0));
        }
        self.intern(Node::Unary(UnaryOp::Not, a))
    }

    pub fn add(&mut self, a: NodeId, b: NodeId) -> NodeId {
        match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) => return self.lit(x + y),
            (Some(0.0), _) => return b,
            (_, Some(0.0)) => return a,
            _ => {}
        }
        if let Some(nb) = self.negated(b) {
            return self.sub(a, nb);
        }
        if let Some(na) = self.negated(a) {
            return self.sub(b, na);
        }
        let (a, b) = (a.min(b), a.max(b));
        self.intern(Node::Binary(BinaryOp::Add, a, b))
    }

    pub fn sub(&mut self, a: NodeId, b: NodeId) -> NodeId {
        match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) => return self.lit(x - y),
            (_, Some(0.0)) => return a,
            (Some(0.0), _) => return self.neg(b),
            _ => {}
        }
        if a == b {
            return self.lit(0.0);
        }
        if let Some(nb) = self.negated(b) {
            return self.add(a, nb);
        }
        self.intern(Node::Binary(BinaryOp::Sub, a, b))
    }

    pub fn mul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) => return self.lit(x * y),
            (Some(0.0), _) | (_, Some(0.0)) => return self.lit(0.0),
            (Some(1.0), _) => return b,
            (_, Some(1.0)) => return a,
            (Some(-1.0), _) => return self.neg(b),
            (_, Some(-1.0)) => return self.neg(a),
            _ => {}
        }
        match (self.negated(a), self.negated(b)) {
            (Some(na), Some(nb)) => return self.mul(na, nb),
            (Some(na), None) => {
                let m = self.mul(na, b);
                return self.neg(m);
            }
            (None, Some(nb)) => {
                let m = self.mul(a, nb);
                return self.neg(m);
            }
            (None, None) => {}
        }
        // Constants first, then by age: `2 * x`, one node for `a * b` and `b * a`.
        let (a, b) = match (self.value(a), self.value(b)) {
            (None, Some(_)) => (b, a),
            (Some(_), None) => (a, b),
            _ => (a.min(b), a.max(b)),
        };
        self.intern(Node::Binary(BinaryOp::Mul, a, b))
    }

    pub fn div(&mut self, a: NodeId, b: NodeId) -> NodeId {
        match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) if y != 0.0 => return self.lit(x / y),
            (Some(0.0), _) => return self.lit(0.0),
            (_, Some(1.0)) => return a,
            (_, Some(-1.0)) => return self.neg(a),
            _ => {}
        }
        if let Some(na) = self.negated(a) {
            let d = self.div(na, b);
            return self.neg(d);
        }
        self.intern(Node::Binary(BinaryOp::Div, a, b))
    }

    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> NodeId {
        match op {
            BinaryOp::Add => self.add(a, b),
            BinaryOp::Sub => self.sub(a, b),
            BinaryOp::Mul => self.mul(a, b),
            BinaryOp::Div => self.div(a, b),
            _ => {
                if let (Some(x), Some(y)) = (self.value(a), self.value(b)) {
                    return self.lit(super::program::binary(op, x, y));
                }
                self.intern(Node::Binary(op, a, b))
            }
        }
    }

    pub fn select(&mut self, c: NodeId, a: NodeId, b: NodeId) -> NodeId {
        if a == b {
            return a;
        }
        if let Some(v) = self.value(c) {
            return if v != 0.0 { a } else { b };
        }
        self.intern(Node::Select(c, a, b))
    }

    pub fn call(&mut self, f: Func, args: Vec<NodeId>) -> NodeId {
        let values: Option<Vec<f64>> = args.iter().map(|&a| self.value(a)).collect();
        if let Some(v) = values {
            let r = call(f, &v);
            if r.is_finite() {
                return self.lit(r);
            }
        }
        if f == Func::Pow {
            if self.is(args[1], 1.0) {
                return args[0];
            }
            if self.is(args[1], 0.0) {
                return self.lit(1.0);
            }
        }
        self.intern(Node::Call(f, args))
    }

    pub fn cast(&mut self, t: CType, a: NodeId) -> NodeId {
        if let Some(v) = self.value(a) {
            return match t.kind {
                TypeKind::Float => a,
                TypeKind::Integer => self.lit(v.trunc()),
            };
        }
        self.intern(Node::Cast(t, a))
    }

    /// The node of `e`, with `env` naming the values in scope.
    pub fn expr(&mut self, e: &Expr, env: &HashMap<String, NodeId>) -> NodeId {
        match e {
            Expr::Lit(v) => self.lit(*v),
            Expr::Var(n) => match env.get(n) {
                Some(&id) => id,
                None => self.leaf(n),
            },
            Expr::Unary(UnaryOp::Neg, a) => {
                let a = self.expr(a, env);
                self.neg(a)
            }
            Expr::Unary(UnaryOp::Not, a) => {
                let a = self.expr(a, env);
                self.not(a)
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a, env), self.expr(b, env));
                self.binary(*op, a, b)
            }
            Expr::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c, env), self.expr(a, env), self.expr(b, env));
                self.select(c, a, b)
            }
            Expr::Call(f, args) => {
                let args = args.iter().map(|a| self.expr(a, env)).collect();
                self.call(*f, args)
            }
            Expr::Cast(t, a) => {
                let a = self.expr(a, env);
                self.cast(t.clone(), a)
            }
        }
    }

    /// The nodes of `body`'s assignments: each name's last value (an output's, a local's).
    pub fn body(&mut self, body: &Body) -> HashMap<String, NodeId> {
        let mut env = HashMap::new();
        for s in &body.stmts {
            let mut v = self.expr(&s.value, &env);
            // A local of an integer type holds the value converted.
            if let Some(t) = &s.local
                && t.kind == TypeKind::Integer
            {
                v = self.cast(t.clone(), v);
            }
            env.insert(s.target.clone(), v);
        }
        env
    }

    /// `id` as an expression, with the nodes `named` gives written as those names.
    pub fn to_expr(&self, id: NodeId, named: &HashMap<NodeId, String>) -> Expr {
        if let Some(n) = named.get(&id) {
            return Expr::Var(n.clone());
        }
        let sub = |c: NodeId| Box::new(self.to_expr(c, named));
        match self.node(id) {
            Node::Lit(bits) => Expr::Lit(f64::from_bits(*bits)),
            Node::Leaf(n) => Expr::Var(n.clone()),
            Node::Unary(op, a) => Expr::Unary(*op, sub(*a)),
            Node::Binary(op, a, b) => Expr::Binary(*op, sub(*a), sub(*b)),
            Node::Select(c, a, b) => Expr::Select(sub(*c), sub(*a), sub(*b)),
            Node::Call(f, args) => {
                Expr::Call(*f, args.iter().map(|&a| self.to_expr(a, named)).collect())
            }
            Node::Cast(t, a) => Expr::Cast(t.clone(), sub(*a)),
        }
    }

    /// The operands of `id`.
    pub fn operands(&self, id: NodeId) -> Vec<NodeId> {
        match self.node(id) {
            Node::Lit(_) | Node::Leaf(_) => Vec::new(),
            Node::Unary(_, a) | Node::Cast(_, a) => vec![*a],
            Node::Binary(_, a, b) => vec![*a, *b],
            Node::Select(c, a, b) => vec![*c, *a, *b],
            Node::Call(_, args) => args.clone(),
        }
    }
}
