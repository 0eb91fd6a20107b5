// The rocm-virgl guest library in one include: encoders, the shared page, the event ring, the
// transport interface with its vtest and virtio-gpu implementations, and the session on top.
#pragma once

#include "rocm_virgl_protocol.h"
#include "rvgl_capset.h"
#include "rvgl_event_ring.h"
#include "rvgl_mapping.h"
#include "rvgl_request_encoder.h"
#include "rvgl_response_slots.h"
#include "rvgl_result.h"
#include "rvgl_seqno.h"
#include "rvgl_session.h"
#include "rvgl_shared_page.h"
#include "rvgl_transport.h"
#include "rvgl_unique_fd.h"
#include "rvgl_virtgpu_syscalls.h"
#include "rvgl_virtgpu_transport.h"
#include "rvgl_vtest_transport.h"
