//! The Vulkan instance: the loader, an instance with the Khronos validation layer and a debug
//! messenger that records every warning and error (when validation is on), a plain instance for
//! enumeration and reports, and install advice when the loader finds no driver.

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, MutexGuard};

use ash::vk;

use crate::conv::fixed_cstr;
use crate::error::{Result, VkError, VkResultExt};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// The validation layer's own semaphore/fence state tracking times out on correct host waits in
/// the Debian 1.3.239 layer ("This is most likely a validation bug"; seen on lavapipe and the
/// H200; KhronosGroup/Vulkan-ValidationLayers#4649 and #5928, fixed by the state-tracking
/// rewrite of #8519). They say nothing about our usage, so they are logged, not counted.
const KNOWN_LAYER_BUGS: [&str; 2] = [
    "UNASSIGNED-VkSemaphore-state-timeout",
    "UNASSIGNED-VkFence-state-timeout",
];

/// Validation messages recorded by the debug messenger.
type MessageStore = Mutex<Vec<String>>;

struct Messenger {
    loader: ash::ext::debug_utils::Instance,
    raw: vk::DebugUtilsMessengerEXT,
}

/// An instance for opening a device: destroyed (messenger first) when dropped.
pub(crate) struct Instance {
    entry: ash::Entry,
    raw: ash::Instance,
    messenger: Option<Messenger>,
    /// Boxed so its address, handed to the messenger, stays put; freed after the instance.
    messages: *mut MessageStore,
    validation: bool,
}

// SAFETY: `messages` is only dereferenced under its own mutex; Vulkan handles are plain values.
unsafe impl Send for Instance {}
unsafe impl Sync for Instance {}

impl Instance {
    /// A Vulkan 1.2 instance; with `validation`, the Khronos validation layer and a messenger
    /// recording its warnings and errors (also those of instance creation itself).
    pub fn new(validation: bool) -> Result<Instance> {
        let entry = load_entry()?;
        let messages: *mut MessageStore = Box::into_raw(Box::new(Mutex::new(Vec::new())));
        // SAFETY: `messages` was just created and is handed over (or freed) exactly once.
        unsafe { Self::create(entry, validation, messages) }.inspect_err(|_| {
            // SAFETY: created above; no messenger holds it (creation failed and everything
            // created was destroyed).
            drop(unsafe { Box::from_raw(messages) });
        })
    }

    unsafe fn create(
        entry: ash::Entry,
        validation: bool,
        messages: *mut MessageStore,
    ) -> Result<Instance> {
        let mut layers: Vec<*const std::ffi::c_char> = Vec::new();
        let mut extensions: Vec<*const std::ffi::c_char> = Vec::new();
        if validation {
            let available = unsafe { entry.enumerate_instance_layer_properties() }
                .vk("vkEnumerateInstanceLayerProperties")?;
            let has_layer = available
                .iter()
                .any(|l| fixed_cstr(&l.layer_name) == VALIDATION_LAYER.to_string_lossy());
            if !has_layer {
                return Err(VkError::NoValidationLayer);
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let app_name = c"texstream";
        let app = vk::ApplicationInfo::default()
            .application_name(app_name)
            .engine_name(app_name)
            .api_version(vk::API_VERSION_1_2);
        let mut messenger_ci = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(debug_callback))
            .user_data(messages as *mut c_void);
        let mut ci = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        if validation {
            ci = ci.push_next(&mut messenger_ci);
        }
        let raw = unsafe { entry.create_instance(&ci, None) }.map_err(instance_error)?;
        let messenger = if validation {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &raw);
            match unsafe { loader.create_debug_utils_messenger(&messenger_ci, None) } {
                Ok(m) => Some(Messenger { loader, raw: m }),
                Err(e) => {
                    unsafe { raw.destroy_instance(None) };
                    return Err(VkError::Vk {
                        call: "vkCreateDebugUtilsMessengerEXT",
                        result: e,
                    });
                }
            }
        } else {
            None
        };
        Ok(Instance {
            entry,
            raw,
            messenger,
            messages,
            validation,
        })
    }

    pub fn entry(&self) -> &ash::Entry {
        &self.entry
    }
    pub fn raw(&self) -> &ash::Instance {
        &self.raw
    }
    pub fn validation(&self) -> bool {
        self.validation
    }

    /// Every validation message (warning or error) recorded so far.
    pub fn messages(&self) -> Vec<String> {
        // SAFETY: the store lives as long as `self`.
        lock(unsafe { &*self.messages }).clone()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: the last user; every device made from the instance is gone.
        unsafe {
            if let Some(m) = &self.messenger {
                m.loader.destroy_debug_utils_messenger(m.raw, None);
            }
            self.raw.destroy_instance(None);
            drop(Box::from_raw(self.messages));
        }
    }
}

fn lock(store: &MessageStore) -> MutexGuard<'_, Vec<String>> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data; `user` is the boxed message store that lives
    // until after the messenger and instance are destroyed.
    let msg = unsafe {
        if data.is_null() || (*data).p_message.is_null() {
            String::from("<no message>")
        } else {
            CStr::from_ptr((*data).p_message)
                .to_string_lossy()
                .into_owned()
        }
    };
    // SAFETY: as above; the id name is a NUL-terminated string or null.
    let id = unsafe {
        if data.is_null() || (*data).p_message_id_name.is_null() {
            String::new()
        } else {
            CStr::from_ptr((*data).p_message_id_name)
                .to_string_lossy()
                .into_owned()
        }
    };
    let line = format!("[{severity:?} {types:?}] {msg}");
    if KNOWN_LAYER_BUGS.contains(&id.as_str()) {
        log::warn!("vulkan (known validation-layer bug, not counted): {line}");
        return vk::FALSE;
    }
    if types == vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE {
        // Advisory only (e.g. "use TRANSFER_DST_OPTIMAL instead of GENERAL" for copies into
        // images we deliberately keep in GENERAL); logged, not counted as a failure.
        log::debug!("vulkan: {line}");
        return vk::FALSE;
    }
    log::warn!("vulkan: {line}");
    if !user.is_null() {
        // SAFETY: see above.
        lock(unsafe { &*(user as *const MessageStore) }).push(line);
    }
    vk::FALSE
}

/// The system Vulkan loader.
pub(crate) fn load_entry() -> Result<ash::Entry> {
    // SAFETY: loading the system Vulkan loader library.
    unsafe { ash::Entry::load() }.map_err(|e| VkError::NoLoader(e.to_string()))
}

/// `vkCreateInstance` failures, with install advice where the loader found no driver.
pub(crate) fn instance_error(result: vk::Result) -> VkError {
    if result == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
        VkError::NoDevice(
            ": the Vulkan loader found no driver; install one, e.g. `sudo apt-get install \
             mesa-vulkan-drivers` (lavapipe, runs on the CPU) or your GPU vendor's driver"
                .into(),
        )
    } else {
        VkError::Vk {
            call: "vkCreateInstance",
            result,
        }
    }
}

/// A plain instance (no layers) at `api`, for enumerating and describing devices; the caller
/// destroys it.
pub(crate) fn plain_instance(entry: &ash::Entry, api: u32) -> Result<ash::Instance> {
    let app = vk::ApplicationInfo::default().api_version(api);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: plain instance creation.
    unsafe { entry.create_instance(&ci, None) }.map_err(instance_error)
}
