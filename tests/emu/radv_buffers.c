// Stock Mesa on the emulator: Debian's RADV (mesa-vulkan-drivers) fills, updates and copies
// small buffers on the emulated node and reads back the right bytes, and a compute dispatch —
// which needs shader execution the emulator does not have — makes the device report lost instead
// of success.
//
// Sizes stay below RADV_BUFFER_OPS_CS_THRESHOLD (4096, radv_private.h): below it RADV fills and
// copies with CP DMA (PM4 DMA_DATA) and updates with WRITE_DATA; at or above it, with shaders.
// Runs with librvgl_emu.so preloaded; exits 0 on success, 1 with a message on the first failure.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

static int failures;

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "radv_buffers: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  ++failures;
}

#define CHECK_VK(call)                                             \
  do {                                                             \
    VkResult r_ = (call);                                          \
    if (r_ != VK_SUCCESS) {                                        \
      fail("%s:%d: %s -> %d", __FILE__, __LINE__, #call, (int)r_); \
      return -1;                                                   \
    }                                                              \
  } while (0)

// The PCI device id the emulated node presents, read from its sysfs entry the way a program
// would (the emulator's configuration, not a constant).
static unsigned emulated_device_id(void) {
  FILE *f = fopen("/sys/class/drm/renderD128/device/device", "r");
  unsigned id = 0;
  if (!f) return 0;
  if (fscanf(f, "%x", &id) != 1) id = 0;
  fclose(f);
  return id;
}

struct gpu {
  VkInstance instance;
  VkPhysicalDevice phys;
  VkDevice device;
  uint32_t families;
  uint32_t host_memory_type;
};

struct buffer {
  VkBuffer buf;
  VkDeviceMemory mem;
  uint8_t *map;
};

static int find_radv(struct gpu *g) {
  VkApplicationInfo app = {
      VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "radv_buffers", 1, NULL, 0, VK_API_VERSION_1_2};
  VkInstanceCreateInfo ici = {
      VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
  CHECK_VK(vkCreateInstance(&ici, NULL, &g->instance));
  uint32_t n = 0;
  CHECK_VK(vkEnumeratePhysicalDevices(g->instance, &n, NULL));
  VkPhysicalDevice devs[16];
  if (n > 16) n = 16;
  CHECK_VK(vkEnumeratePhysicalDevices(g->instance, &n, devs));
  const unsigned want = emulated_device_id();
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceDriverProperties drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                     .pNext = &drv};
    vkGetPhysicalDeviceProperties2(devs[i], &p);
    if (drv.driverID == VK_DRIVER_ID_MESA_RADV && p.properties.vendorID == 0x1002 &&
        p.properties.deviceID == want) {
      g->phys = devs[i];
      printf("device: %s (%04x)\n", p.properties.deviceName, p.properties.deviceID);
      return 0;
    }
  }
  fail("no RADV device with PCI id %04x among %u devices", want, n);
  return -1;
}

static int create_device(struct gpu *g) {
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &nf, NULL);
  VkQueueFamilyProperties fam[8];
  if (nf > 8) nf = 8;
  vkGetPhysicalDeviceQueueFamilyProperties(g->phys, &nf, fam);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci[8];
  uint32_t nq = 0;
  for (uint32_t i = 0; i < nf; ++i) {
    if (!(fam[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))) continue;
    qci[nq] =
        (VkDeviceQueueCreateInfo){VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, i, 1, &prio};
    ++nq;
  }
  if (nq == 0) {
    fail("no graphics or compute queue family");
    return -1;
  }
  VkDeviceCreateInfo dci = {
      VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, nq, qci, 0, NULL, 0, NULL, NULL};
  CHECK_VK(vkCreateDevice(g->phys, &dci, NULL, &g->device));
  g->families = 0;
  for (uint32_t i = 0; i < nq; ++i)
    g->families |= 1u << qci[i].queueFamilyIndex;

  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(g->phys, &mp);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((mp.memoryTypes[i].propertyFlags & want) == want) {
      g->host_memory_type = i;
      return 0;
    }
  fail("no host-visible coherent memory type");
  return -1;
}

static int create_buffer(struct gpu *g, VkDeviceSize size, struct buffer *b) {
  VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            NULL,
                            0,
                            size,
                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                            VK_SHARING_MODE_EXCLUSIVE,
                            0,
                            NULL};
  CHECK_VK(vkCreateBuffer(g->device, &bci, NULL, &b->buf));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(g->device, b->buf, &req);
  VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, req.size,
                              g->host_memory_type};
  CHECK_VK(vkAllocateMemory(g->device, &mai, NULL, &b->mem));
  CHECK_VK(vkBindBufferMemory(g->device, b->buf, b->mem, 0));
  void *p;
  CHECK_VK(vkMapMemory(g->device, b->mem, 0, VK_WHOLE_SIZE, 0, &p));
  b->map = p;
  memset(b->map, 0x11, size);
  return 0;
}

static void destroy_buffer(struct gpu *g, struct buffer *b) {
  vkUnmapMemory(g->device, b->mem);
  vkDestroyBuffer(g->device, b->buf, NULL);
  vkFreeMemory(g->device, b->mem, NULL);
}

static void barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                       &mb, 0, NULL, 0, NULL);
}

// Records `record` into a one-time command buffer on `family`, submits it, waits.
// Returns the first non-success result of submit or wait.
typedef void (*recorder)(VkCommandBuffer cb, void *arg);
static VkResult submit_and_wait(struct gpu *g, uint32_t family, recorder record, void *arg) {
  VkQueue q;
  vkGetDeviceQueue(g->device, family, 0, &q);
  VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, family};
  VkCommandPool pool;
  VkResult r = vkCreateCommandPool(g->device, &pci, NULL, &pool);
  if (r != VK_SUCCESS) return r;
  VkCommandBufferAllocateInfo cai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool,
                                     VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  VkCommandBuffer cb;
  r = vkAllocateCommandBuffers(g->device, &cai, &cb);
  VkFence fence = VK_NULL_HANDLE;
  if (r == VK_SUCCESS) {
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                   VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    vkBeginCommandBuffer(cb, &bi);
    record(cb, arg);
    r = vkEndCommandBuffer(cb);
  }
  if (r == VK_SUCCESS) {
    VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0};
    r = vkCreateFence(g->device, &fci, NULL, &fence);
  }
  if (r == VK_SUCCESS) {
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cb, 0, NULL};
    r = vkQueueSubmit(q, 1, &si, fence);
  }
  if (r == VK_SUCCESS) r = vkWaitForFences(g->device, 1, &fence, VK_TRUE, 10ull * 1000000000ull);
  if (fence) vkDestroyFence(g->device, fence, NULL);
  vkDestroyCommandPool(g->device, pool, NULL);
  return r;
}

struct copy_job {
  struct buffer *a, *b;
  uint32_t words[64];
};

static void record_transfers(VkCommandBuffer cb, void *arg) {
  struct copy_job *j = arg;
  vkCmdFillBuffer(cb, j->a->buf, 0, 256, 0xdeadbeefu);
  vkCmdFillBuffer(cb, j->a->buf, 256, 3584, 0x01020304u);
  vkCmdUpdateBuffer(cb, j->a->buf, 3840, sizeof(j->words), j->words);
  barrier(cb);
  VkBufferCopy region = {0, 4, 4092};
  vkCmdCopyBuffer(cb, j->a->buf, j->b->buf, 1, &region);
}

static uint32_t word_at(const uint8_t *p, size_t off) {
  uint32_t v;
  memcpy(&v, p + off, 4);
  return v;
}

// The bytes the GPU must have left: A = fill, fill, update; B[4..4096) = A[0..4092).
static void check_transfers(const struct copy_job *j, uint32_t family) {
  for (size_t off = 0; off < 4096; off += 4) {
    uint32_t want = off < 256 ? 0xdeadbeefu : off < 3840 ? 0x01020304u : j->words[(off - 3840) / 4];
    if (word_at(j->a->map, off) != want) {
      fail("family %u: A[%zu] = %08x, want %08x", family, off, word_at(j->a->map, off), want);
      return;
    }
  }
  if (word_at(j->b->map, 0) != 0x11111111u) fail("family %u: B[0] overwritten", family);
  for (size_t off = 4; off < 4096; off += 4)
    if (word_at(j->b->map, off) != word_at(j->a->map, off - 4)) {
      fail("family %u: B[%zu] = %08x, want %08x", family, off, word_at(j->b->map, off),
           word_at(j->a->map, off - 4));
      return;
    }
}

// An empty compute shader (local size 1x1x1), SPIR-V 1.0 assembled by hand:
// OpCapability Shader; OpMemoryModel Logical GLSL450; OpEntryPoint GLCompute %1 "main";
// OpExecutionMode %1 LocalSize 1 1 1; %2 = void; %3 = fn void; %1 = function; label; return.
static const uint32_t kEmptyCompute[] = {
    0x07230203, 0x00010000, 0, 5,          0,          0x00020011, 1,          0x0003000e, 0, 1,
    0x0005000f, 5,          1, 0x6e69616d, 0,          0x00060010, 1,          17,         1, 1,
    1,          0x00020013, 2, 0x00030021, 3,          2,          0x00050036, 2,          1, 0,
    3,          0x000200f8, 4, 0x000100fd, 0x00010038,
};

struct dispatch_job {
  VkPipeline pipeline;
};

static void record_dispatch(VkCommandBuffer cb, void *arg) {
  struct dispatch_job *j = arg;
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, j->pipeline);
  vkCmdDispatch(cb, 1, 1, 1);
}

static int dispatch_is_lost(struct gpu *g, uint32_t family) {
  VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0,
                                   sizeof(kEmptyCompute), kEmptyCompute};
  VkShaderModule sm;
  CHECK_VK(vkCreateShaderModule(g->device, &smci, NULL, &sm));
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  VkPipelineLayout layout;
  CHECK_VK(vkCreatePipelineLayout(g->device, &plci, NULL, &layout));
  VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      NULL,
                                      0,
                                      {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                                       VK_SHADER_STAGE_COMPUTE_BIT, sm, "main", NULL},
                                      layout,
                                      VK_NULL_HANDLE,
                                      -1};
  struct dispatch_job j;
  CHECK_VK(vkCreateComputePipelines(g->device, VK_NULL_HANDLE, 1, &cpci, NULL, &j.pipeline));
  // The job fails like a hang the kernel recovered from: its context is guilty. Mesa 22.3's RADV
  // learns that when it next submits (amdgpu CS answers ECANCELED: radv_amdgpu_cs_submit maps it
  // to VK_ERROR_DEVICE_LOST); the wait for the dispatch itself may still report success, as it
  // does on a real GPU.
  const VkResult r = submit_and_wait(g, family, record_dispatch, &j);
  if (r != VK_SUCCESS && r != VK_ERROR_DEVICE_LOST)
    fail("dispatch on family %u: %d, want success or DEVICE_LOST", family, r);
  // Every later submission, on any queue, reports the loss; none reports success.
  for (uint32_t f = 0; f < 32; ++f) {
    if (!(g->families & (1u << f))) continue;
    const VkResult again = submit_and_wait(g, f, record_dispatch, &j);
    if (again != VK_ERROR_DEVICE_LOST)
      fail("submission on family %u after the dispatch: %d, want DEVICE_LOST", f, again);
  }
  vkDestroyPipeline(g->device, j.pipeline, NULL);
  vkDestroyPipelineLayout(g->device, layout, NULL);
  vkDestroyShaderModule(g->device, sm, NULL);
  return 0;
}

int main(void) {
  struct gpu g = {0};
  if (find_radv(&g) || create_device(&g)) return 1;
  for (uint32_t family = 0; family < 32; ++family) {
    if (!(g.families & (1u << family))) continue;
    struct buffer a, b;
    if (create_buffer(&g, 4096, &a) || create_buffer(&g, 4096, &b)) return 1;
    struct copy_job j = {&a, &b, {0}};
    for (uint32_t i = 0; i < 64; ++i)
      j.words[i] = 0xa0000000u + i * 0x01010101u + family;
    const VkResult r = submit_and_wait(&g, family, record_transfers, &j);
    if (r != VK_SUCCESS)
      fail("transfers on family %u: %d", family, r);
    else
      check_transfers(&j, family);
    destroy_buffer(&g, &a);
    destroy_buffer(&g, &b);
    printf("family %u: fill, update, copy %s\n", family, failures ? "FAILED" : "ok");
  }
  // Family 0 is RADV's universal (GFX) queue; the dispatch goes to the first compute-capable one.
  uint32_t compute_family = 0;
  while (!(g.families & (1u << compute_family)))
    ++compute_family;
  if (dispatch_is_lost(&g, compute_family) == 0) printf("dispatch: device lost, as it must be\n");
  vkDestroyDevice(g.device, NULL);
  vkDestroyInstance(g.instance, NULL);
  return failures ? 1 : 0;
}
