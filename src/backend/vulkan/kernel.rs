//! One Vulkan kernel: its shader module, layouts and specialised pipelines, the objects a
//! launch keeps alive until it retires, and the launch itself (`KernelImpl`).

use super::*;

/// One kernel's shader module, layouts and specialised pipelines.
pub(super) struct VkKernel {
    pub(super) inner: Arc<Inner>,
    pub(super) name: String,
    pub(super) emitted: Emitted,
    pub(super) manifest: KernelManifest,
    /// The shader, layouts and pipelines, shared with every launch not yet retired: a
    /// command buffer recorded (or submitted) before the kernel is dropped still names them.
    pub(super) objects: Arc<KernelObjects>,
    pub(super) bindings: u32,
    /// The bindings of constant buffers: uniform-buffer descriptors.
    pub(super) uniform_bindings: Vec<u32>,
    /// The buffers are pushed into the command buffer (`VK_KHR_push_descriptor`, at most
    /// `maxPushDescriptors` of them) rather than bound through a set from a per-launch pool.
    pub(super) push_descriptors: bool,
    pub(super) min_offset_align: u64,
    pub(super) params: Vec<String>,
    /// The subgroup size the pipeline requires, where the device allows requiring one.
    pub(super) required_subgroup: Option<u32>,
    /// The loop-limit status buffer (`Emitted::loop_status`), locked by a launch until it has
    /// read the flag back, and the driver's limit.
    pub(super) loop_status: Option<(Mutex<Staging>, u32)>,
    /// The checks' report buffer (`Emitted::report`), locked by a launch until it has read
    /// the report back.
    pub(super) report: Option<Mutex<Staging>>,
    /// The `print`/`assert` buffer (`Emitted::debug`), locked by a launch until it has read
    /// the records back.
    pub(super) debug: Option<Mutex<Staging>>,
}

/// A kernel's Vulkan objects. Each launch's keep list holds an `Arc` of them until its
/// submission retires, so dropping a `Program` (or kernel) while a launch is recorded or in
/// flight destroys nothing the command buffer uses; the last owner destroys them.
pub(super) struct KernelObjects {
    pub(super) inner: Arc<Inner>,
    pub(super) shader: vk::ShaderModule,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    /// Pipelines by (block, dynamic shared elements).
    pub(super) pipelines: Mutex<HashMap<([u32; 3], u32), vk::Pipeline>>,
    /// The SPIR-V bytes counted in the device's code memory while these objects live.
    pub(super) code_bytes: u64,
}

// SAFETY: Vulkan handles are integers; pipelines are created under the mutex.
unsafe impl Send for KernelObjects {}
// SAFETY: as above; nothing is mutated through a shared reference but under the mutex.
unsafe impl Sync for KernelObjects {}

impl Drop for KernelObjects {
    fn drop(&mut self) {
        self.inner
            .code_bytes
            .fetch_sub(self.code_bytes, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the last owner: every launch that used these objects has retired (its keep
        // list held an owner), so no pending command buffer names them.
        unsafe {
            for (_, p) in self.pipelines.lock().drain() {
                self.inner.device.destroy_pipeline(p, None);
            }
            self.inner.device.destroy_pipeline_layout(self.layout, None);
            self.inner
                .device
                .destroy_descriptor_set_layout(self.set_layout, None);
            self.inner.device.destroy_shader_module(self.shader, None);
        }
        self.inner.kernel_destroyed();
    }
}

/// The descriptor type of `binding`: a uniform buffer for a constant buffer's binding, a
/// storage buffer otherwise.
fn descriptor_type(uniform_bindings: &[u32], binding: u32) -> vk::DescriptorType {
    if uniform_bindings.contains(&binding) {
        vk::DescriptorType::UNIFORM_BUFFER
    } else {
        vk::DescriptorType::STORAGE_BUFFER
    }
}

/// A stable hash of the SPIR-V words (FNV-1a), the manifest's code hash.
pub(super) fn hash_words(words: &[u32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

impl VkKernel {
    pub(super) fn new(
        inner: &Arc<Inner>,
        name: &str,
        function: &Function,
        emitted: Emitted,
        min_offset_align: u64,
        required_subgroup: Option<u32>,
        loop_limit: Option<u32>,
    ) -> Result<VkKernel, DeviceError> {
        let dev = &inner.device;
        // Constant buffers (`buf<_, const>`) are uniform buffers (`spirv::constant`).
        let uniform_bindings: Vec<u32> = emitted
            .slots
            .iter()
            .zip(&function.params)
            .filter_map(|(s, p)| match (s, p.ty) {
                (
                    ParamSlot::Buffer { binding, .. },
                    crate::ir::Type::Buffer {
                        access: crate::ir::Access::Constant,
                        ..
                    },
                ) => Some(*binding),
                _ => None,
            })
            .collect();
        let bindings = emitted
            .slots
            .iter()
            .filter(|s| matches!(s, ParamSlot::Buffer { .. }))
            .count() as u32
            + emitted.loop_status.is_some() as u32
            + emitted.report.is_some() as u32
            + emitted.debug.is_some() as u32;
        let debug = match emitted.debug {
            Some(_) => Some(Mutex::new(Staging::with_usage(
                inner,
                crate::hal::debug::BUFFER_WORDS as usize * 4,
                vk::BufferUsageFlags::STORAGE_BUFFER,
            )?)),
            None => None,
        };
        let report = match emitted.report {
            Some(_) => Some(Mutex::new(Staging::with_usage(
                inner,
                REPORT_WORDS * 4,
                vk::BufferUsageFlags::STORAGE_BUFFER,
            )?)),
            None => None,
        };
        let loop_status = match (emitted.loop_status, loop_limit) {
            (Some(_), Some(limit)) => Some((
                Mutex::new(Staging::with_usage(
                    inner,
                    8,
                    vk::BufferUsageFlags::STORAGE_BUFFER,
                )?),
                limit,
            )),
            _ => None,
        };
        // SAFETY: valid create infos on a live device; destroyed in Drop.
        unsafe {
            let shader = dev
                .create_shader_module(
                    &vk::ShaderModuleCreateInfo::default().code(&emitted.words),
                    None,
                )
                .map_err(|e| vk_err("vkCreateShaderModule", e))?;
            let binds: Vec<_> = (0..bindings)
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(descriptor_type(&uniform_bindings, b))
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let push_descriptors = bindings > 0
                && inner
                    .push_descriptor
                    .as_ref()
                    .is_some_and(|&(_, max)| bindings <= max);
            let mut set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds);
            if push_descriptors {
                set_info = set_info.flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR);
            }
            let set_layout = dev
                .create_descriptor_set_layout(&set_info, None)
                .map_err(|e| vk_err("vkCreateDescriptorSetLayout", e))?;
            let ranges = [vk::PushConstantRange {
                stage_flags: vk::ShaderStageFlags::COMPUTE,
                offset: 0,
                size: emitted.push_bytes,
            }];
            let layouts = [set_layout];
            let mut li = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
            if emitted.push_bytes > 0 {
                li = li.push_constant_ranges(&ranges);
            }
            let layout = dev
                .create_pipeline_layout(&li, None)
                .map_err(|e| vk_err("vkCreatePipelineLayout", e))?;
            let manifest = manifest_of(function, &emitted);
            let code_bytes = emitted.words.len() as u64 * 4;
            inner
                .code_bytes
                .fetch_add(code_bytes, std::sync::atomic::Ordering::Relaxed);
            Ok(VkKernel {
                inner: inner.clone(),
                name: name.to_string(),
                emitted,
                manifest,
                objects: Arc::new(KernelObjects {
                    inner: inner.clone(),
                    code_bytes,
                    shader,
                    set_layout,
                    layout,
                    pipelines: Mutex::new(HashMap::new()),
                }),
                bindings,
                uniform_bindings,
                push_descriptors,
                min_offset_align,
                params: function.params.iter().map(|p| p.name.clone()).collect(),
                required_subgroup,
                loop_status,
                report,
                debug,
            })
        }
    }

    fn pipeline(&self, block: [u32; 3], shared_len: u32) -> Result<vk::Pipeline, DeviceError> {
        let mut map = self.objects.pipelines.lock();
        if let Some(&p) = map.get(&(block, shared_len)) {
            return Ok(p);
        }
        let data: Vec<u8> = [block[0], block[1], block[2], shared_len]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let entries: Vec<_> = (0..4u32)
            .map(|i| vk::SpecializationMapEntry {
                constant_id: i,
                offset: i * 4,
                size: 4,
            })
            .collect();
        let spec = vk::SpecializationInfo::default()
            .map_entries(&entries)
            .data(&data);
        let entry = std::ffi::CString::new(self.emitted.entry.clone()).expect("sanitised name");
        let mut required = vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default()
            .required_subgroup_size(self.required_subgroup.unwrap_or(0));
        let mut stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(self.objects.shader)
            .name(&entry)
            .specialization_info(&spec);
        if self.required_subgroup.is_some() {
            stage = stage.push_next(&mut required);
        }
        let mut info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.objects.layout);
        if self.inner.exec_stats.is_some() {
            info = info.flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR);
        }
        let p = {
            let mut cache = self.inner.pipeline_cache.lock();
            // SAFETY: valid create info; the pipeline is destroyed with the kernel. The cache is
            // used under its mutex (externally synchronised, as Vulkan requires).
            let p = unsafe {
                self.inner
                    .device
                    .create_compute_pipelines(cache.0, &[info], None)
            }
            .map_err(|(_, e)| vk_err("vkCreateComputePipelines", e))?[0];
            cache.1 += 1;
            if cache.1 >= PIPELINE_CACHE_ENTRIES {
                // SAFETY: pipelines do not depend on the cache they were made through; the
                // old one is used by nothing else (the mutex is held).
                unsafe {
                    if let Ok(fresh) = self
                        .inner
                        .device
                        .create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
                    {
                        let inner = &self.inner;
                        super::pipelines::save(
                            &inner.device,
                            cache.0,
                            &inner.cache,
                            &inner.cache_key,
                        );
                        self.inner.device.destroy_pipeline_cache(cache.0, None);
                        *cache = (fresh, 0);
                    }
                }
            }
            p
        };
        if let Some(stats) = &self.inner.exec_stats {
            print_pipeline_stats(stats, p, &self.name, block);
        }
        map.insert((block, shared_len), p);
        Ok(p)
    }
}

/// `XPU_VK_PIPELINE_STATS=1`: the driver's statistics of a pipeline, one line on stderr.
pub(super) fn print_pipeline_stats(
    stats: &ash::khr::pipeline_executable_properties::Device,
    pipeline: vk::Pipeline,
    kernel: &str,
    block: [u32; 3],
) {
    let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
    // SAFETY: a live pipeline created with CAPTURE_STATISTICS.
    let Ok(executables) = (unsafe { stats.get_pipeline_executable_properties(&info) }) else {
        return;
    };
    for index in 0..executables.len() as u32 {
        let exe = vk::PipelineExecutableInfoKHR::default()
            .pipeline(pipeline)
            .executable_index(index);
        // SAFETY: as above, with an index below the count the driver gave.
        let Ok(list) = (unsafe { stats.get_pipeline_executable_statistics(&exe) }) else {
            continue;
        };
        let items: Vec<String> = list
            .iter()
            .map(|st| {
                let name = st
                    .name_as_c_str()
                    .map_or("?".into(), |n| n.to_string_lossy());
                // SAFETY: the union member is the one `format` names.
                let value = unsafe {
                    match st.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                            (st.value.b32 != 0).to_string()
                        }
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => st.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => {
                            st.value.f64.to_string()
                        }
                        _ => st.value.u64.to_string(),
                    }
                };
                format!("{name}={value}")
            })
            .collect();
        eprintln!(
            "vulkan pipeline {kernel} block {block:?}: {}",
            items.join(", ")
        );
    }
}

/// A value's bytes as its push-constant carrier expects them.
pub(super) fn carrier_bytes(v: &HostValue, carrier: crate::ir::ElemType) -> Vec<u8> {
    let from = v.ty().scalar;
    let mut out = Vec::new();
    for &bits in v.lanes() {
        let wide: u64 = match (from, carrier.scalar) {
            (a, b) if a == b => bits,
            (Scalar::F16, Scalar::F32) => {
                half::f16::from_bits(bits as u16).to_f32().to_bits() as u64
            }
            (Scalar::I8, _) => bits as u8 as i8 as i32 as u32 as u64,
            (Scalar::I16, _) => bits as u16 as i16 as i32 as u32 as u64,
            _ => bits,
        };
        out.extend_from_slice(&wide.to_le_bytes()[..carrier.scalar.size() as usize]);
    }
    out
}

impl KernelImpl for VkKernel {
    fn manifest(&self) -> &KernelManifest {
        &self.manifest
    }

    fn launch(
        &self,
        stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        let started = std::time::Instant::now();
        let device_err = |e: DeviceError| LaunchError::Device {
            kernel: self.name.clone(),
            message: e.to_string(),
        };
        let s = stream.as_any().downcast_ref::<VkStream>().ok_or_else(|| {
            LaunchError::ForeignObject {
                kernel: self.name.clone(),
                what: "the stream".into(),
            }
        })?;
        // Wave verbs work on subgroups, which hold consecutive linear local ids only when the
        // block is 1-D or its rows fill whole subgroups (lavapipe packs each row separately).
        let mut steps = Steps::start(self.inner.trace);
        let sg = self.emitted.subgroup_size.max(1);
        if self.emitted.uses_wave_verbs
            && (launch.block[1] > 1 || launch.block[2] > 1)
            && launch.block[0] % sg != 0
        {
            return Err(LaunchError::WaveWidth {
                kernel: self.name.clone(),
                declared: self.emitted.wave_width,
                reason: format!(
                    "unsupported on this Vulkan device: wave verbs in a {}x{}x{} block whose rows \
                     do not fill subgroups of {sg}",
                    launch.block[0], launch.block[1], launch.block[2]
                ),
            });
        }
        let mut push = vec![0u8; self.emitted.push_bytes as usize];
        let mut writes: Vec<(u32, vk::Buffer, u64, u64)> = Vec::new();
        let mut keep: Vec<Keep> = Vec::new();
        let mut dummy = None;
        for (i, (slot, arg)) in self.emitted.slots.iter().zip(args).enumerate() {
            match (slot, arg) {
                (
                    ParamSlot::Buffer {
                        binding,
                        len_offset,
                    },
                    DeviceArg::Buffer(b),
                ) => {
                    let mem = memory_of(&b.memory).map_err(device_err)?;
                    if b.offset as u64 % self.min_offset_align != 0 {
                        return Err(LaunchError::UnbindableView {
                            kernel: self.name.clone(),
                            param: self.params[i].clone(),
                            offset: b.offset as u64,
                            align: self.min_offset_align,
                        });
                    }
                    let count = (b.len / b.elem.size().max(1) as usize) as u32;
                    push[*len_offset as usize..*len_offset as usize + 4]
                        .copy_from_slice(&count.to_le_bytes());
                    if b.len == 0 {
                        // Vulkan binds no empty range: a small scratch buffer stands in (the
                        // kernel sees length 0 and may not touch it).
                        if dummy.is_none() {
                            let (buf, m) = self
                                .inner
                                .buffer(
                                    16,
                                    vk::BufferUsageFlags::STORAGE_BUFFER
                                        | vk::BufferUsageFlags::UNIFORM_BUFFER,
                                    vk::MemoryPropertyFlags::DEVICE_LOCAL,
                                )
                                .map_err(device_err)?;
                            dummy = Some(Arc::new(VkMemory {
                                inner: self.inner.clone(),
                                buffer: buf,
                                memory: m,
                                size: 16,
                            }));
                        }
                        let d = dummy.as_ref().expect("made above");
                        writes.push((*binding, d.buffer, 0, 16));
                        keep.push(Box::new(d.clone()));
                    } else {
                        writes.push((*binding, mem.buffer, b.offset as u64, b.len as u64));
                    }
                    keep.push(Box::new(b.memory.clone()));
                }
                (ParamSlot::Value { offset, carrier }, DeviceArg::Value(v)) => {
                    let bytes = carrier_bytes(v, *carrier);
                    push[*offset as usize..*offset as usize + bytes.len()].copy_from_slice(&bytes);
                }
                _ => {
                    return Err(LaunchError::Device {
                        kernel: self.name.clone(),
                        message: format!("argument {i} does not match the kernel's layout"),
                    })
                }
            }
        }
        // The loop-limit probe's status buffer: flag 0, probe bound 2 (spirv.rs). Held until
        // the launch has completed and the flag is read back.
        let status = match (&self.loop_status, self.emitted.loop_status) {
            (Some((buffer, limit)), Some(binding)) => {
                let guard = buffer.lock();
                guard
                    .with_map(|m| {
                        m[..4].copy_from_slice(&0u32.to_le_bytes());
                        m[4..8].copy_from_slice(&2u32.to_le_bytes());
                    })
                    .map_err(device_err)?;
                writes.push((binding, guard.buffer, 0, 8));
                Some((guard, *limit))
            }
            _ => None,
        };
        // The checks' report buffer: cleared, held until the launch has read it back.
        let report = match (&self.report, self.emitted.report) {
            (Some(buffer), Some(binding)) => {
                let guard = buffer.lock();
                guard
                    .with_map(|m| m[..REPORT_WORDS * 4].fill(0))
                    .map_err(device_err)?;
                writes.push((binding, guard.buffer, 0, (REPORT_WORDS * 4) as u64));
                Some(guard)
            }
            _ => None,
        };
        // The `print`/`assert` buffer: cleared, held until the launch has read it back.
        let debug_bytes = crate::hal::debug::BUFFER_WORDS as usize * 4;
        let debug = match (&self.debug, self.emitted.debug) {
            (Some(buffer), Some(binding)) => {
                let guard = buffer.lock();
                guard
                    .with_map(|m| m[..debug_bytes].fill(0))
                    .map_err(device_err)?;
                writes.push((binding, guard.buffer, 0, debug_bytes as u64));
                Some(guard)
            }
            _ => None,
        };
        let args_us = steps.lap();
        let shared_len = match self.emitted.dynamic_shared_elem {
            Some(size) => (launch.shared_bytes / size.max(1)).max(1),
            None => 1,
        };
        let pipeline = self
            .pipeline(launch.block, shared_len)
            .map_err(device_err)?;
        let pipeline_us = steps.lap();
        let dev = &self.inner.device;
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = writes
            .iter()
            .map(|&(_, buffer, offset, range)| {
                [vk::DescriptorBufferInfo {
                    buffer,
                    offset,
                    range,
                }]
            })
            .collect();
        // The writes name no set: pushed as they are, or aimed at the per-launch set.
        let ws: Vec<vk::WriteDescriptorSet> = writes
            .iter()
            .zip(&infos)
            .map(|(&(binding, ..), info)| {
                vk::WriteDescriptorSet::default()
                    .dst_binding(binding)
                    .descriptor_type(descriptor_type(&self.uniform_bindings, binding))
                    .buffer_info(info)
            })
            .collect();
        // Without push descriptors: one small descriptor pool per launch, destroyed when the
        // launch completes.
        let set = if self.bindings > 0 && !self.push_descriptors {
            let uniforms = self.uniform_bindings.len() as u32;
            let sizes: Vec<vk::DescriptorPoolSize> = [
                (vk::DescriptorType::STORAGE_BUFFER, self.bindings - uniforms),
                (vk::DescriptorType::UNIFORM_BUFFER, uniforms),
            ]
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(ty, descriptor_count)| vk::DescriptorPoolSize {
                ty,
                descriptor_count,
            })
            .collect();
            // SAFETY: valid create/alloc infos; the pool is kept until completion.
            unsafe {
                let pool = dev
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(1)
                            .pool_sizes(&sizes),
                        None,
                    )
                    .map_err(|e| device_err(vk_err("vkCreateDescriptorPool", e)))?;
                keep.push(Box::new(DescriptorPool {
                    inner: self.inner.clone(),
                    pool,
                }));
                let layouts = [self.objects.set_layout];
                let set = dev
                    .allocate_descriptor_sets(
                        &vk::DescriptorSetAllocateInfo::default()
                            .descriptor_pool(pool)
                            .set_layouts(&layouts),
                    )
                    .map_err(|e| device_err(vk_err("vkAllocateDescriptorSets", e)))?[0];
                let ws: Vec<_> = ws.iter().map(|w| w.dst_set(set)).collect();
                dev.update_descriptor_sets(&ws, &[]);
                Some(set)
            }
        } else {
            None
        };
        let descriptors_us = steps.lap();
        let layout = self.objects.layout;
        let grid = launch.grid;
        // The pipeline and layouts stay alive until this launch retires.
        keep.push(Box::new(self.objects.clone()));
        let pusher = match (&self.inner.push_descriptor, self.push_descriptors) {
            (Some((p, _)), true) => Some(p),
            _ => None,
        };
        let r = s.record(keep, |cb| {
            // SAFETY: `cb` is recording; every object it names is kept alive until done.
            unsafe {
                dev.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                if let Some(set) = set {
                    dev.cmd_bind_descriptor_sets(
                        cb,
                        vk::PipelineBindPoint::COMPUTE,
                        layout,
                        0,
                        &[set],
                        &[],
                    );
                }
                if let Some(p) = pusher {
                    p.cmd_push_descriptor_set(cb, vk::PipelineBindPoint::COMPUTE, layout, 0, &ws);
                }
                if !push.is_empty() {
                    dev.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                }
                dev.cmd_dispatch(cb, grid[0], grid[1], grid[2]);
            }
        });
        if self.inner.trace {
            let record_us = steps.lap();
            eprintln!(
                "xpu-vk launch {} grid {grid:?} block {:?}: args {args_us:.1} us, pipeline \
                 {pipeline_us:.1} us, descriptors {descriptors_us:.1} us ({}), record \
                 {record_us:.1} us, total {:.1} us",
                self.name,
                launch.block,
                if self.push_descriptors {
                    "pushed"
                } else {
                    "pool"
                },
                args_us + pipeline_us + descriptors_us + record_us
            );
        }
        r.map_err(device_err)?;
        // A deadline: the launch is submitted and waited for with it as the timeout. A kernel
        // cannot be cancelled here; past the deadline it is reported and left to finish (the
        // stream's next wait or sync waits for it, and the device stays usable).
        if let Some(deadline) = launch.deadline {
            let until = started.checked_add(deadline).unwrap_or(started);
            if !s.core.wait_last_until(until).map_err(device_err)? {
                return Err(LaunchError::Deadline {
                    kernel: self.name.clone(),
                    deadline,
                    cancelled: false,
                });
            }
        }
        // On a driver that limits loops, a kernel with a loop is waited for and its status read:
        // a loop the driver cut short fails the launch rather than leaving wrong results.
        if let Some((guard, limit)) = status {
            s.sync().map_err(device_err)?;
            let flag = guard
                .with_map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
                .map_err(device_err)?;
            if flag != 0 {
                return Err(LaunchError::LoopLimit {
                    kernel: self.name.clone(),
                    limit,
                });
            }
        }
        // A kernel with `print` or `assert` is waited for and its records read: the lines go
        // to the sink, a failed assert is the launch's refusal (`XPU-L035`) unless a check's
        // (below) is.
        let mut printed = Ok(());
        if let Some(guard) = debug {
            s.sync().map_err(device_err)?;
            printed = guard
                .with_map(|m| {
                    crate::hal::debug::finish_bytes(
                        &self.name,
                        &m[..debug_bytes],
                        &self.emitted.debug_sites,
                        launch.grid,
                        launch.block,
                    )
                })
                .map_err(device_err)?;
        }
        // A kernel with checks is waited for and its report read: the first failed check is
        // the launch's refusal (`XPU-L013`, `XPU-L010`).
        if let Some(guard) = report {
            s.sync().map_err(device_err)?;
            let r = guard
                .with_map(|m| Report::decode_bytes(&m[..REPORT_WORDS * 4]))
                .map_err(device_err)?;
            if let Some(e) = report_error(&self.name, r, &self.emitted.sites) {
                return Err(e);
            }
        }
        printed
    }
}
