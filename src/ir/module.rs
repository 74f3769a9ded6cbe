//! The module: the unit a front end hands over, and the unit the verifier checks.

use super::{Arena, Function, Handle, Span};

/// A closed set of device helpers that a function-tag value indexes (contract §2.1).
#[derive(Clone, Debug, PartialEq)]
pub struct TagSet {
    /// The set's name (the tag type's name).
    pub name: String,
    /// The helpers, in tag order (tag `i` names `members[i]`).
    pub members: Vec<Handle<Function>>,
    /// Where the set was declared.
    pub span: Span,
}

/// Kernels, device helpers, templates and tag sets, in declaration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// Every function, in declaration order.
    pub functions: Arena<Function>,
    /// Every tag set, in declaration order.
    pub tag_sets: Arena<TagSet>,
    /// Shape families declared over templates (`family NAME = Template(...)`, contract §6.1).
    pub families: Vec<super::family::FamilyDecl>,
}

impl Module {
    /// An empty module.
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

    /// The tag set named `name`.
    pub fn tag_set(&self, name: &str) -> Option<Handle<TagSet>> {
        self.tag_sets
            .iter()
            .find(|(_, t)| t.name == name)
            .map(|(h, _)| h)
    }

    /// The kernels (templates included), in declaration order.
    pub fn kernels(&self) -> impl Iterator<Item = (Handle<Function>, &Function)> {
        self.functions.iter().filter(|(_, f)| f.is_kernel())
    }
}
