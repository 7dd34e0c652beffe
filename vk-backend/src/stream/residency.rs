//! Host bookkeeping of the atlas slots: which page each slot holds, the load that filled it,
//! and the last compute step that read it; and, for a page that left its slot, the last step
//! that may have read its page-table entry (its next load rewrites that entry).

use foldhash::{HashMap, HashMapExt};

use crate::error::{Result, VkError};

/// (model, page within the model).
pub(crate) type PageId = (u32, u32);

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    content: Option<PageId>,
    /// Transfer value of the load that filled the slot.
    ticket: u64,
    /// Compute value of the last step that read the slot (survives eviction: the next load into
    /// the slot must wait for it).
    last_read: u64,
}

/// What `need` found for one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    pub slot: u32,
    pub ticket: u64,
}

pub(crate) struct Residency {
    slots: Vec<Slot>,
    resident: HashMap<PageId, u32>,
    /// Pages evicted since they were last loaded: the last compute step that read their slot
    /// while they held it (one entry per page the engine has seen, so bounded by the atlas's
    /// logical pages).
    evicted_reads: HashMap<PageId, u64>,
}

impl Residency {
    pub fn new(slots: u32) -> Self {
        Residency {
            slots: vec![Slot::default(); slots as usize],
            resident: HashMap::new(),
            evicted_reads: HashMap::new(),
        }
    }

    fn slot(&self, slot: u32) -> Result<&Slot> {
        self.slots.get(slot as usize).ok_or_else(|| {
            VkError::Stream(format!(
                "slot {slot} out of range (the atlas has {} slots)",
                self.slots.len()
            ))
        })
    }

    /// Empties `slot`. Returns the page it held.
    pub fn evict(&mut self, slot: u32) -> Result<Option<PageId>> {
        self.slot(slot)?;
        let s = &mut self.slots[slot as usize];
        let Some(id) = s.content.take() else {
            return Ok(None);
        };
        self.resident.remove(&id);
        self.evicted_reads.insert(id, s.last_read);
        Ok(Some(id))
    }

    /// Compute value of the last step that may have read `id`'s page-table entry before it was
    /// evicted (0 = never resident): its next load rewrites the entry, after that step.
    pub fn last_read_of_evicted(&self, id: PageId) -> u64 {
        self.evicted_reads.get(&id).copied().unwrap_or(0)
    }

    /// Compute value the next overwrite of `slot` must wait for.
    pub fn last_read(&self, slot: u32) -> Result<u64> {
        Ok(self.slot(slot)?.last_read)
    }

    /// Puts `id` into the (empty) `slot`, filled by load `ticket`.
    pub fn fill(&mut self, id: PageId, slot: u32, ticket: u64) -> Result<()> {
        let s = self.slot(slot)?;
        if let Some(old) = s.content {
            return Err(VkError::Stream(format!(
                "slot {slot} still holds model {} page {}",
                old.0, old.1
            )));
        }
        if let Some(&other) = self.resident.get(&id) {
            return Err(VkError::Stream(format!(
                "model {} page {} is already resident in slot {other}",
                id.0, id.1
            )));
        }
        let s = &mut self.slots[slot as usize];
        s.content = Some(id);
        s.ticket = ticket;
        self.resident.insert(id, slot);
        Ok(())
    }

    /// Looks up a page a step reads.
    pub fn need(&self, id: PageId) -> Option<Need> {
        let &slot = self.resident.get(&id)?;
        Some(Need {
            slot,
            ticket: self.slots[slot as usize].ticket,
        })
    }

    pub fn mark_read(&mut self, slot: u32, value: u64) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.last_read = s.last_read.max(value);
        }
    }

    /// Slot holding `id`, if resident.
    pub fn slot_of(&self, id: PageId) -> Option<u32> {
        self.resident.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_need_evict_cycle() {
        let mut r = Residency::new(2);
        r.fill((0, 3), 1, 7).unwrap();
        assert_eq!(r.need((0, 3)), Some(Need { slot: 1, ticket: 7 }));
        assert_eq!(r.last_read_of_evicted((0, 3)), 0, "never evicted");
        r.mark_read(1, 5);
        assert!(r.fill((0, 4), 1, 8).is_err(), "occupied slot");
        assert!(r.fill((0, 3), 0, 8).is_err(), "already resident");
        assert_eq!(r.evict(1).unwrap(), Some((0, 3)));
        assert_eq!(r.last_read(1).unwrap(), 5);
        assert_eq!(
            r.last_read_of_evicted((0, 3)),
            5,
            "its table entry was read by step 5"
        );
        assert_eq!(r.need((0, 3)), None);
        assert!(r.evict(9).is_err());
        r.fill((1, 0), 1, 9).unwrap();
        assert_eq!(r.slot_of((1, 0)), Some(1));
    }
}
