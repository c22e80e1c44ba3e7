//! A ring of provided buffers (kernel ≥ 5.19): the kernel picks a free buffer for each
//! completion of a multishot receive, so the worker needs no read buffer per connection —
//! memory follows the bytes in flight, not the connection count — and a receive is armed
//! once per connection instead of once per read.
//!
//! The entries ring and the buffers are anonymous mappings owned by this struct. The
//! kernel writes into a buffer only while it is in the ring; a buffer handed out in a
//! completion is ours until `recycle` gives it back.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous mapping of `len` bytes at an address the kernel chooses.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

pub(super) struct BufRing {
    entries: Mapping,
    buffers: Mapping,
    count: u16,
    size: usize,
    /// Our copy of the ring's tail: buffers recycled but not yet published.
    tail: u16,
    bgid: u16,
}

impl BufRing {
    /// Registers `count` (a power of two) buffers of `size` bytes as group `bgid`.
    pub(super) fn new(
        submitter: &Submitter<'_>,
        count: u16,
        size: usize,
        bgid: u16,
    ) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let entries = Mapping::new(count as usize * std::mem::size_of::<BufRingEntry>())?;
        let buffers = Mapping::new(count as usize * size)?;
        // SAFETY: the entries mapping is page-aligned, `count` entries long, and lives
        // until this struct is dropped, after the ring has unregistered it (`release`).
        unsafe { submitter.register_buf_ring_with_flags(entries.ptr as u64, count, bgid, 0)? };
        let mut ring = BufRing {
            entries,
            buffers,
            count,
            size,
            tail: 0,
            bgid,
        };
        for bid in 0..count {
            ring.recycle(bid);
        }
        ring.publish();
        Ok(ring)
    }

    pub(super) fn group(&self) -> u16 {
        self.bgid
    }

    /// The `len` bytes the kernel wrote into buffer `bid`.
    pub(super) fn get(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.count && len <= self.size);
        // SAFETY: within the buffers mapping; the buffer is out of the ring (the kernel
        // handed it to us in a completion) until `recycle`.
        unsafe { std::slice::from_raw_parts(self.buffers.ptr.add(bid as usize * self.size), len) }
    }

    /// Gives buffer `bid` back to the kernel (visible after `publish`).
    pub(super) fn recycle(&mut self, bid: u16) {
        let slot = (self.tail & (self.count - 1)) as usize;
        // SAFETY: `slot` < count entries of the entries mapping; the kernel reads entries
        // only up to the published tail, which this one is past.
        let entry = unsafe { &mut *self.entries.ptr.cast::<BufRingEntry>().add(slot) };
        // SAFETY: within the buffers mapping.
        let addr = unsafe { self.buffers.ptr.add(bid as usize * self.size) };
        entry.set_addr(addr as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the recycled buffers to the kernel (one release store per loop).
    pub(super) fn publish(&self) {
        // SAFETY: the tail is a u16 inside the first entry, shared with the kernel, which
        // reads it with acquire semantics.
        let tail = unsafe {
            &*(BufRingEntry::tail(self.entries.ptr.cast::<BufRingEntry>()) as *const AtomicU16)
        };
        tail.store(self.tail, Ordering::Release);
    }
}
