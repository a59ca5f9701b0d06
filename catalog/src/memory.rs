//! Giving freed memory back to the operating system.

/// Hands memory freed by a compile or a catalog load (the parsed document,
/// a replaced catalog) back to the OS. NB: glibc keeps freed heap in
/// per-thread arenas, so without this a process would keep the transient
/// peak of the largest document it ever compiled or loaded for the rest
/// of its life. Elsewhere a no-op.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks the allocator's own free
    // lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
