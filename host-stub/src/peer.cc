// Peer access calls (calls.def, 0x1020), between the client's contexts on the host GPUs
// its guest devices map to. Devices are guest indexes, checked here; copies name device
// ranges that must lie in the client's own allocations (memory.cc's rule), whichever
// device they are on.
#include <limits>

#include "session.h"

namespace vmcuda::host {

CUcontext Session::context_of(int device) {
  if (!valid_device(device)) return nullptr;
  if (!contexts_[device]) {
    // ensure_context works on the current device: borrow it for a moment.
    const int current = current_;
    current_ = device;
    const bool ok = ensure_context();
    current_ = current;
    make_current(current_);
    if (!ok) return nullptr;
  }
  return contexts_[device];
}

// One direction of peer access (from `device`'s context to `peer`'s), and the arena's
// VMM mappings, which cuCtxEnablePeerAccess does not cover. device == peer is the grant a
// memory pool's access gives `device` (cudaMemPoolSetAccess): the arena's mappings only,
// no context's peer access (its key is no pair CUDA can name).
CUresult Session::set_peer_access(int device, int peer, bool enable) {
  CUcontext peer_ctx = context_of(peer);
  if (!peer_ctx || !context_of(device)) return ctx_error_;
  CUresult e = device == peer ? CUDA_SUCCESS : on_device(device, [&] {
    return enable ? api_.cuCtxEnablePeerAccess(peer_ctx, 0) : api_.cuCtxDisablePeerAccess(peer_ctx);
  });
  if (e != CUDA_SUCCESS) return e;
  const bool had_any = has_peer_access(device);
  if (enable)
    vol_.add(ObjectKind::PeerAccess, device, peer_key(device, peer), vol_.context(device)->id, PeerAccessObject{});
  else if (Object* o = vol_.find(ObjectKind::PeerAccess, peer_key(device, peer)))
    vol_.remove(o->id);
  // The arena's VMM mappings are granted per device, not per pair: `device` may read and
  // write all of them while it has peer access to any other device. (Finer would need a
  // grant per mapping's device; CUDA's own VMM memory is granted per mapping as well.)
  const bool has_any = has_peer_access(device);
  if (arena_ && had_any != has_any) {
    if (CUresult a = arena_->set_peer_access(devices_[device], has_any); a != CUDA_SUCCESS) {
      if (enable) {  // take the driver's grant back: all or nothing
        if (device != peer) on_device(device, [&] { return api_.cuCtxDisablePeerAccess(peer_ctx); });
        if (Object* o = vol_.find(ObjectKind::PeerAccess, peer_key(device, peer))) vol_.remove(o->id);
      }
      return a;
    }
  }
  return CUDA_SUCCESS;
}

bool Session::has_peer_access(int device) const {
  const auto& all = vol_.of(ObjectKind::PeerAccess);
  auto it = all.lower_bound(peer_key(device, 0));
  return it != all.end() && (it->first >> 32) == static_cast<uint32_t>(device);
}

void Session::drop_peer_access(int device) {
  std::vector<uint64_t> pairs;
  for (const auto& [key, id] : vol_.of(ObjectKind::PeerAccess)) pairs.push_back(key);
  for (uint64_t key : pairs) {
    const int from = static_cast<int>(key >> 32), to = static_cast<int>(key & 0xffffffffu);
    if (from != device && to != device) continue;
    set_peer_access(from, to, false);
    // Gone with the reset even where the driver objected.
    if (Object* o = vol_.find(ObjectKind::PeerAccess, key)) vol_.remove(o->id);
  }
}

int32_t Session::on_DeviceCanAccessPeer(const api::PeerArgs& a, api::PeerReply& r, Request&) {
  if (!valid_device(a.device) || !valid_device(a.peer)) return CUDA_ERROR_INVALID_DEVICE;
  r.value = 0;
  // A device and itself: 0, as CUDA answers.
  if (a.device == a.peer || devices_[a.device] == devices_[a.peer]) return CUDA_SUCCESS;
  CUdevice dev, peer;
  if (CUresult e = api_.cuDeviceGet(&dev, devices_[a.device]); e != CUDA_SUCCESS) return e;
  if (CUresult e = api_.cuDeviceGet(&peer, devices_[a.peer]); e != CUDA_SUCCESS) return e;
  return api_.cuDeviceCanAccessPeer(&r.value, dev, peer);
}

int32_t Session::on_EnablePeerAccess(const api::PeerAccessArgs& a, api::Empty&, Request&) {
  if (!valid_device(a.peer)) return CUDA_ERROR_INVALID_DEVICE;
  if (a.flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // A device cannot be its own peer (cudaDeviceCanAccessPeer says 0): peer access
  // unsupported (217), as NVIDIA's runtime answers on the H200 (tests/cuda/device_limits.cu).
  if (a.peer == current_ || devices_[a.peer] == devices_[current_]) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (vol_.find(ObjectKind::PeerAccess, peer_key(current_, a.peer))) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  // The driver answers the rest: CUDA_ERROR_INVALID_DEVICE where the GPUs cannot reach
  // each other, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, CUDA_ERROR_TOO_MANY_PEERS.
  return set_peer_access(current_, a.peer, true);
}

int32_t Session::on_DisablePeerAccess(const api::PeerAccessArgs& a, api::Empty&, Request&) {
  if (!valid_device(a.peer)) return CUDA_ERROR_INVALID_DEVICE;
  if (a.peer == current_) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;  // (its key is a pool's grant)
  if (!vol_.find(ObjectKind::PeerAccess, peer_key(current_, a.peer))) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  return set_peer_access(current_, a.peer, false);
}

int32_t Session::on_MemPoolAccess(const api::PoolAccessArgs& a, api::Empty&, Request&) {
  if (a.pad) return guest_fault("MemPoolAccess: padding not zero");
  if (!valid_device(a.owner) || !valid_device(a.accessor) || a.owner == a.accessor) return CUDA_ERROR_INVALID_DEVICE;
  if (a.enable > 1) return CUDA_ERROR_INVALID_VALUE;
  if (a.enable && devices_[a.owner] != devices_[a.accessor]) {
    // The driver maps pool memory only for a device that can reach the owner's.
    CUdevice owner, accessor;
    int can = 0;
    if (CUresult e = api_.cuDeviceGet(&owner, devices_[a.owner]); e != CUDA_SUCCESS) return e;
    if (CUresult e = api_.cuDeviceGet(&accessor, devices_[a.accessor]); e != CUDA_SUCCESS) return e;
    if (CUresult e = api_.cuDeviceCanAccessPeer(&can, accessor, owner); e != CUDA_SUCCESS) return e;
    if (!can) return CUDA_ERROR_INVALID_DEVICE;
  }
  // The guest counts its pools' grants and asks for the first and after the last.
  const bool granted = vol_.find(ObjectKind::PeerAccess, peer_key(a.accessor, a.accessor)) != nullptr;
  if (granted == (a.enable != 0)) return CUDA_SUCCESS;
  return set_peer_access(a.accessor, a.accessor, a.enable != 0);
}

int32_t Session::on_DeviceGetP2PAttribute(const api::P2PAttributeArgs& a, api::PeerReply& r, Request&) {
  if (!valid_device(a.src) || !valid_device(a.dst)) return CUDA_ERROR_INVALID_DEVICE;
  // The driver refuses a device and itself (invalid device); so does this, also where two
  // guest devices are one GPU.
  if (a.src == a.dst || devices_[a.src] == devices_[a.dst]) return CUDA_ERROR_INVALID_DEVICE;
  CUdevice src, dst;
  if (CUresult e = api_.cuDeviceGet(&src, devices_[a.src]); e != CUDA_SUCCESS) return e;
  if (CUresult e = api_.cuDeviceGet(&dst, devices_[a.dst]); e != CUDA_SUCCESS) return e;
  return api_.cuDeviceGetP2PAttribute(&r.value, a.attribute, src, dst);
}

int32_t Session::on_MemcpyPeer(const api::MemcpyPeerArgs& a, api::Empty&, Request&) {
  if (!valid_device(a.dst_device) || !valid_device(a.src_device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!owns_range(a.dst, a.bytes) || !owns_range(a.src, a.bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  CUcontext dst = context_of(a.dst_device), src = context_of(a.src_device);
  if (!dst || !src) return ctx_error_;
  // Ordered after the work of both devices (cuMemcpyPeer on their legacy default streams).
  return api_.cuMemcpyPeer(a.dst, dst, a.src, src, a.bytes);
}

int32_t Session::on_MemcpyPeerAsync(const api::MemcpyPeerAsyncArgs& a, api::Empty&, Request&) {
  if (!valid_device(a.dst_device) || !valid_device(a.src_device)) return CUDA_ERROR_INVALID_DEVICE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (!owns_range(a.dst, a.bytes) || !owns_range(a.src, a.bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  CUcontext dst = context_of(a.dst_device), src = context_of(a.src_device);
  if (!dst || !src) return ctx_error_;
  return on_device(device, [&] { return api_.cuMemcpyPeerAsync(a.dst, dst, a.src, src, a.bytes, s); });
}

}  // namespace vmcuda::host
