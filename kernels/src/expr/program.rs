//! A body as a straight-line program ([`Program`]): what a host executor runs over chunks of
//! elements. Each value is computed once (the body's graph shares what it computes twice),
//! constants are folded, and what no output needs is left out.

use std::collections::HashMap;

use super::ast::{BinaryOp, Body, Func, TypeKind, UnaryOp};
use super::graph::{Graph, Node, NodeId};
use super::parse::Scope;

/// One instruction; its result is the register of its own index.
#[derive(Clone, Debug, PartialEq)]
pub enum Instr {
    /// The `k`-th element input of the scope.
    Input(usize),
    /// The `k`-th scalar parameter of the scope.
    Param(usize),
    /// A number.
    Lit(f64),
    /// `-a`, `!a`.
    Unary(UnaryOp, usize),
    /// `a op b`.
    Binary(BinaryOp, usize, usize),
    /// `c ? a : b`.
    Select(usize, usize, usize),
    /// A function of one register, or of two (`args[1]` unused for one).
    Call(Func, [usize; 2]),
    /// A conversion: to an integer type truncates toward zero; to a float type is the value.
    Cast(TypeKind, usize),
}

/// A body lowered to instructions over registers.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The instructions, operands before their users.
    pub instrs: Vec<Instr>,
    /// The register holding each output, in the scope's order.
    pub outputs: Vec<usize>,
}

impl Program {
    /// `body` (whose names are `scope`'s) as a program.
    ///
    /// ```
    /// use kusari_kernels::expr::{parse_body, Program, Scope};
    /// let scope = Scope { inputs: vec!["x".into()], outputs: vec!["y".into()], ..Scope::default() };
    /// let p = Program::lower(&parse_body("y = exp(x) * exp(x) + 1", &scope).unwrap(), &scope);
    /// // x, exp(x) once, the product, 1, the sum.
    /// assert_eq!(p.instrs.len(), 5);
    /// assert_eq!(p.eval(&[0.0], &[]), [2.0]);
    /// ```
    pub fn lower(body: &Body, scope: &Scope) -> Program {
        let mut g = Graph::default();
        for name in scope.inputs.iter().chain(&scope.params) {
            g.leaf(name);
        }
        let env = g.body(body);
        let roots: Vec<NodeId> = scope.outputs.iter().map(|o| env[o]).collect();
        // Reachable nodes, in the graph's order (operands first).
        let mut needed = vec![false; g.nodes.len()];
        let mut stack = roots.clone();
        while let Some(id) = stack.pop() {
            if !std::mem::replace(&mut needed[id.0], true) {
                stack.extend(g.operands(id));
            }
        }
        let mut reg: HashMap<NodeId, usize> = HashMap::new();
        let mut instrs = Vec::new();
        for (i, _) in needed.iter().enumerate().filter(|(_, n)| **n) {
            let id = NodeId(i);
            let r = |n: &NodeId| reg[n];
            let instr = match g.node(id) {
                Node::Lit(bits) => Instr::Lit(f64::from_bits(*bits)),
                Node::Leaf(name) => match scope.inputs.iter().position(|n| n == name) {
                    Some(k) => Instr::Input(k),
                    None => Instr::Param(
                        scope
                            .params
                            .iter()
                            .position(|n| n == name)
                            .expect("a leaf is an input or a parameter"),
                    ),
                },
                Node::Unary(op, a) => Instr::Unary(*op, r(a)),
                Node::Binary(op, a, b) => Instr::Binary(*op, r(a), r(b)),
                Node::Select(c, a, b) => Instr::Select(r(c), r(a), r(b)),
                Node::Call(f, args) => Instr::Call(*f, [r(&args[0]), args.get(1).map_or(0, r)]),
                Node::Cast(t, a) => Instr::Cast(t.kind, r(a)),
            };
            reg.insert(id, instrs.len());
            instrs.push(instr);
        }
        let outputs = roots.iter().map(|id| reg[id]).collect();
        Program { instrs, outputs }
    }

    /// The outputs for one element, in `f64` (a reference for executors).
    pub fn eval(&self, inputs: &[f64], params: &[f64]) -> Vec<f64> {
        let mut regs: Vec<f64> = Vec::with_capacity(self.instrs.len());
        for instr in &self.instrs {
            let v = match *instr {
                Instr::Input(k) => inputs[k],
                Instr::Param(k) => params[k],
                Instr::Lit(v) => v,
                Instr::Unary(UnaryOp::Neg, a) => -regs[a],
                Instr::Unary(UnaryOp::Not, a) => f64::from(regs[a] == 0.0),
                Instr::Binary(op, a, b) => binary(op, regs[a], regs[b]),
                Instr::Select(c, a, b) => {
                    if regs[c] != 0.0 {
                        regs[a]
                    } else {
                        regs[b]
                    }
                }
                Instr::Call(f, [a, b]) => super::eval::call(f, &[regs[a], regs[b]]),
                Instr::Cast(TypeKind::Integer, a) => regs[a].trunc(),
                Instr::Cast(TypeKind::Float, a) => regs[a],
            };
            regs.push(v);
        }
        self.outputs.iter().map(|&r| regs[r]).collect()
    }
}

/// `a op b` in `f64`, comparisons and logic as 0 or 1.
pub fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Lt => f64::from(a < b),
        BinaryOp::Le => f64::from(a <= b),
        BinaryOp::Gt => f64::from(a > b),
        BinaryOp::Ge => f64::from(a >= b),
        BinaryOp::Eq => f64::from(a == b),
        BinaryOp::Ne => f64::from(a != b),
        BinaryOp::And => f64::from(a != 0.0 && b != 0.0),
        BinaryOp::Or => f64::from(a != 0.0 || b != 0.0),
    }
}
