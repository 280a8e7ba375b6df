//! Runtime, device, stream and event calls (see the invariants in ffi/mod.rs).

use std::ffi::{c_char, c_int};

use super::{Api, HipError, PROPS_BUF_BYTES, RawEvent, RawStream, Status};

impl Api {
    pub(crate) fn runtime_version(&self) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipRuntimeGetVersion", unsafe {
            (self.hip.runtime_get_version)(&mut v)
        })?;
        Ok(v)
    }

    pub(crate) fn driver_version(&self) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipDriverGetVersion", unsafe { (self.hip.driver_get_version)(&mut v) })?;
        Ok(v)
    }

    pub(crate) fn device_count(&self) -> Result<i32, HipError> {
        let mut n = 0;
        // SAFETY: writes one int through a valid pointer.
        self.check("hipGetDeviceCount", unsafe { (self.hip.get_device_count)(&mut n) })?;
        Ok(n)
    }

    pub(crate) fn set_device(&self, dev: i32) -> Result<(), HipError> {
        // SAFETY: plain value argument; HIP validates the index.
        self.check("hipSetDevice", unsafe { (self.hip.set_device)(dev) })
    }

    pub(crate) fn device_synchronize(&self) -> Result<(), HipError> {
        // SAFETY: no arguments.
        self.check("hipDeviceSynchronize", unsafe { (self.hip.device_synchronize)() })
    }

    pub(crate) fn attribute(&self, attr: i32, dev: i32) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: writes one int; HIP validates attr and dev.
        self.check("hipDeviceGetAttribute", unsafe {
            (self.hip.device_get_attribute)(&mut v, attr, dev)
        })?;
        Ok(v)
    }

    fn string_query(
        &self,
        func: &'static str,
        f: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
        dev: i32,
    ) -> Result<String, HipError> {
        const LEN: c_int = 512;
        let mut buf = [0 as c_char; LEN as usize];
        // SAFETY: HIP writes at most LEN-1 bytes plus NUL into the buffer of LEN bytes.
        self.check(func, unsafe { f(buf.as_mut_ptr(), LEN - 1, dev) })?;
        // c_char is i8 or u8 by target: the same byte either way.
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c.to_ne_bytes()[0])
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(crate) fn device_name(&self, dev: i32) -> Result<String, HipError> {
        self.string_query("hipDeviceGetName", self.hip.device_get_name, dev)
    }

    pub(crate) fn pci_bus_id(&self, dev: i32) -> Result<String, HipError> {
        self.string_query("hipDeviceGetPCIBusId", self.hip.device_get_pci_bus_id, dev)
    }

    /// The raw bytes of hipDeviceProp_t (layout depends on the HIP ABI; scan, don't index).
    pub(crate) fn device_properties_bytes(&self, dev: i32) -> Result<Vec<u8>, HipError> {
        let (f, name) = self.props.ok_or_else(|| HipError::MissingSymbol {
            library: self.hip_path.clone(),
            symbol: "hipGetDeviceProperties",
        })?;
        let mut buf = vec![0u64; PROPS_BUF_BYTES / 8];
        // SAFETY: the struct HIP writes is far smaller than the zeroed, 8-aligned buffer.
        self.check(name, unsafe { f(buf.as_mut_ptr().cast(), dev) })?;
        Ok(buf.iter().flat_map(|w| w.to_ne_bytes()).collect())
    }

    pub(crate) fn host_allocator(&self) -> &'static str {
        if self.ext_host_alloc.is_some() {
            "hipExtHostAlloc"
        } else {
            "hipHostMalloc"
        }
    }

    pub(crate) fn has_cu_mask(&self) -> bool {
        self.cu_mask.is_some()
    }

    pub(crate) fn stream_priority_range(&self) -> Result<(i32, i32), HipError> {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: writes two ints through valid pointers.
        self.check("hipDeviceGetStreamPriorityRange", unsafe {
            (self.hip.stream_priority_range)(&mut least, &mut greatest)
        })?;
        Ok((least, greatest))
    }

    /// A non-blocking stream (flag hipStreamNonBlocking = 1) of the given priority.
    pub(crate) fn stream_create(&self, priority: i32) -> Result<RawStream, HipError> {
        let mut s = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer.
        self.check("hipStreamCreateWithPriority", unsafe {
            (self.hip.stream_create_with_priority)(&mut s, 1, priority)
        })?;
        Ok(RawStream(s))
    }

    /// A stream with its own hardware queue (hipExtStreamCreateWithCUMask).
    pub(crate) fn stream_create_cu_mask(&self, mask: &[u32]) -> Result<RawStream, HipError> {
        let f = self.cu_mask.ok_or_else(|| HipError::MissingSymbol {
            library: self.hip_path.clone(),
            symbol: "hipExtStreamCreateWithCUMask",
        })?;
        let words = u32::try_from(mask.len())
            .map_err(|_| HipError::Invalid(format!("a CU mask of {} words is too long", mask.len())))?;
        let mut s = std::ptr::null_mut();
        // SAFETY: HIP reads `words` (= mask.len()) words from the slice and writes one handle.
        self.check("hipExtStreamCreateWithCUMask", unsafe {
            f(&mut s, words, mask.as_ptr())
        })?;
        Ok(RawStream(s))
    }

    pub(crate) fn stream_destroy(&self, s: RawStream) -> Result<(), HipError> {
        // SAFETY: the handle came from stream_create* and is consumed here (destroyed once).
        self.check("hipStreamDestroy", unsafe { (self.hip.stream_destroy)(s.0) })
    }

    pub(crate) fn stream_synchronize(&self, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: a live stream handle.
        self.check("hipStreamSynchronize", unsafe { (self.hip.stream_synchronize)(s.0) })
    }

    pub(crate) fn event_create(&self, flags: u32) -> Result<RawEvent, HipError> {
        let mut e = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer.
        self.check("hipEventCreateWithFlags", unsafe {
            (self.hip.event_create_with_flags)(&mut e, flags)
        })?;
        Ok(RawEvent(e))
    }

    pub(crate) fn event_record(&self, e: &RawEvent, s: &RawStream) -> Result<(), HipError> {
        // SAFETY: live handles.
        self.check("hipEventRecord", unsafe { (self.hip.event_record)(e.0, s.0) })
    }

    pub(crate) fn event_synchronize(&self, e: &RawEvent) -> Result<(), HipError> {
        // SAFETY: a live event handle.
        self.check("hipEventSynchronize", unsafe { (self.hip.event_synchronize)(e.0) })
    }

    /// Ok(true) when the event completed, Ok(false) on hipErrorNotReady.
    pub(crate) fn event_query(&self, e: &RawEvent) -> Result<bool, HipError> {
        // SAFETY: a live event handle.
        match unsafe { (self.hip.event_query)(e.0) } {
            600 => Ok(false),
            st => self.check("hipEventQuery", st).map(|_| true),
        }
    }

    pub(crate) fn event_elapsed_ms(&self, start: &RawEvent, stop: &RawEvent) -> Result<f32, HipError> {
        let mut ms = 0f32;
        // SAFETY: writes one float; live handles.
        self.check("hipEventElapsedTime", unsafe {
            (self.hip.event_elapsed_time)(&mut ms, start.0, stop.0)
        })?;
        Ok(ms)
    }

    pub(crate) fn event_destroy(&self, e: RawEvent) -> Result<(), HipError> {
        // SAFETY: consumed here, destroyed once.
        self.check("hipEventDestroy", unsafe { (self.hip.event_destroy)(e.0) })
    }
}
