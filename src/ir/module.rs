//! The module: the unit a front end hands over, and the unit the verifier checks.

use super::{Arena, Function, Handle, Span};

/// A closed set of device helpers that a function-tag value indexes (contract §2.1).
#[derive(Clone, Debug, PartialEq)]
pub struct TagSet {
    pub name: String,
    pub members: Vec<Handle<Function>>,
    pub span: Span,
}

/// Kernels, device helpers, templates and tag sets, in declaration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    pub functions: Arena<Function>,
    pub tag_sets: Arena<TagSet>,
    /// Shape families declared over templates (`family NAME = Template(...)`, contract §6.1).
    pub families: Vec<super::family::FamilyDecl>,
}

impl Module {
    pub fn new() -> Self {
        Self::default()
    }

    /// The function named `name` (kernel, helper or template).
    pub fn function(&self, name: &str) -> Option<Handle<Function>> {
        self.functions
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(h, _)| h)
    }

    pub fn tag_set(&self, name: &str) -> Option<Handle<TagSet>> {
        self.tag_sets
            .iter()
            .find(|(_, t)| t.name == name)
            .map(|(h, _)| h)
    }

    pub fn kernels(&self) -> impl Iterator<Item = (Handle<Function>, &Function)> {
        self.functions.iter().filter(|(_, f)| f.is_kernel())
    }
}
