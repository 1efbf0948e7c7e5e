//! Names interned to small numbers: FIFO groups and tenants are kept by number in a queue's
//! indexes, and by name only here, so that an index entry is a few bytes whatever the name.

use foldhash::HashMap;

/// Names interned to small numbers, each with a value; numbers of forgotten names are reused.
#[derive(Debug, Clone)]
pub(crate) struct Interned<T> {
    slots: Vec<Option<(Box<str>, T)>>,
    free: Vec<u32>,
    numbers: HashMap<Box<str>, u32>,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            slots: Vec::new(),
            free: Vec::new(),
            numbers: HashMap::default(),
        }
    }
}

impl<T: Default> Interned<T> {
    /// The number of `name`, interned with a default value if it was not.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.numbers.get(name) {
            return n;
        }
        let slot = Some((name.into(), T::default()));
        let n = match self.free.pop() {
            Some(n) => {
                self.slots[n as usize] = slot;
                n
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.numbers.insert(name.into(), n);
        n
    }
}

impl<T> Interned<T> {
    pub(crate) fn get(&self, n: u32) -> Option<&T> {
        self.slots
            .get(n as usize)
            .and_then(Option::as_ref)
            .map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, n: u32) -> Option<&mut T> {
        self.slots
            .get_mut(n as usize)
            .and_then(Option::as_mut)
            .map(|(_, v)| v)
    }

    pub(crate) fn name(&self, n: u32) -> Option<&str> {
        self.slots
            .get(n as usize)
            .and_then(Option::as_ref)
            .map(|(name, _)| &**name)
    }

    /// Forgets `n` and its name; the number may be given to another name.
    pub(crate) fn forget(&mut self, n: u32) {
        if let Some((name, _)) = self.slots.get_mut(n as usize).and_then(Option::take) {
            self.numbers.remove(&name);
            self.free.push(n);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.numbers.len()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.numbers.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forgotten_number_goes_to_the_next_new_name() {
        let mut names: Interned<u32> = Interned::default();
        let a = names.intern("a");
        let b = names.intern("b");
        assert_eq!(names.intern("a"), a, "a name keeps its number");
        *names.get_mut(b).expect("b") = 7;
        names.forget(a);
        assert_eq!(
            (names.len(), names.contains("a"), names.name(a)),
            (1, false, None)
        );
        let c = names.intern("c");
        assert_eq!(c, a, "the number is reused");
        assert_eq!((names.get(c), names.get(b)), (Some(&0), Some(&7)));
    }
}
