//! The hardware-queue abstraction the launcher drives.

/// Identifier of a command submitted to an [`XQueue`](crate::XQueue): a per-queue sequence
/// number starting at 0, assigned at submission. Launch order is id order.
pub type CommandId = u64;

/// A hardware queue: an in-order stream of commands plus sync points (events).
///
/// This is all Lv1 needs of a device (XSched's `HwQueue`): launch, record a sync point
/// after everything launched so far, wait for one, and wait for everything.
///
/// Methods take `&self` and the queue is `Sync` because the launcher launches from one
/// thread while a sync point may be waited on by another (the launcher's completion thread)
/// and the suspending thread may synchronize. Implementations must keep launches in call order and must not panic;
/// a failing call returns an error, which the launcher reports on the commands concerned.
pub trait HwQueue: Send + Sync + 'static {
    /// What is launched (a kernel and its arguments, a host delay, ...).
    type Command: Send + 'static;
    /// A recorded sync point.
    type SyncPoint: Send + 'static;
    /// Errors of the device.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Enqueue `cmd` after everything launched before. Must not wait for it to run.
    /// `id` is the launcher's id for it, for devices that keep per-command records.
    fn launch(&self, id: CommandId, cmd: Self::Command) -> Result<(), Self::Error>;

    /// Record a sync point that completes once every command launched so far has completed.
    fn record(&self) -> Result<Self::SyncPoint, Self::Error>;

    /// Block until `sp` has completed.
    fn wait(&self, sp: &Self::SyncPoint) -> Result<(), Self::Error>;

    /// Block until every command launched so far has completed.
    fn synchronize(&self) -> Result<(), Self::Error>;
}
