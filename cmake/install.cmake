# `make install` (cmake --install, any --prefix, DESTDIR) and the Debian packages
# (scripts/build-debs.sh) take their files from here, in three components:
#   host   the GPU host: vmcuda-stub, vmcudactl, vmcuda-run (with vmcuda's libcudart.so.13 and libcuda.so.1
#          in a private folder, lib/vmcuda-run, so that no host program picks it up by
#          accident), the systemd unit and sysusers file, the libvirt hook, the QEMU
#          wrapper, docs and examples, man pages
#   guest  inside a VM: libcudart.so.13, libcuda.so.1 and libnvidia-ml.so.1 in lib/vmcuda, which the loader is told about
#          (ld.so.conf.d), so that programs find it without LD_LIBRARY_PATH
#   dkms   inside a VM: the guest driver's source for DKMS (src/vmcuda-VERSION)
# Files that name installed paths are written at install time, for the prefix given then.
include(GNUInstallDirs)

# vmcuda's libcublas.so.13, libcublasLt.so.13, libcufft.so.12, libcurand.so.10 and libcudnn.so.9
# (where they are built: guest-lib/CMakeLists.txt), beside libcudart.so.13 in both library
# folders, so that the loader finds them as it finds NVIDIA's.
set(vmcuda_cublas_files "")
foreach(lib cublas cublasLt cufft curand cudnn)
  string(TOLOWER ${lib} target)
  if(TARGET vmcuda_${target})
    list(APPEND vmcuda_cublas_files $<TARGET_FILE:vmcuda_${target}> ${CMAKE_BINARY_DIR}/guest-lib/lib${lib}.so)
  endif()
endforeach()

# ---- host
install(TARGETS vmcuda-stub vmcudactl RUNTIME DESTINATION bin COMPONENT host)
install(PROGRAMS ${CMAKE_BINARY_DIR}/host-stub/vmcuda-run DESTINATION bin COMPONENT host)
install(FILES $<TARGET_FILE:vmcuda_cudart> $<TARGET_FILE:vmcuda_cuda> ${CMAKE_BINARY_DIR}/guest-lib/libcuda.so
              $<TARGET_FILE:vmcuda_nvml> ${CMAKE_BINARY_DIR}/guest-lib/libnvidia-ml.so ${vmcuda_cublas_files}
        DESTINATION lib/vmcuda-run COMPONENT host)
install(PROGRAMS qemu-config/qemu-vmcuda DESTINATION lib/vmcuda COMPONENT host)
install(FILES qemu-config/vmcuda.sysusers DESTINATION lib/sysusers.d RENAME vmcuda.conf COMPONENT host)
install(FILES README.md docs/running.md docs/attaching-a-vm.md docs/snapshots.md docs/security.md
              docs/benchmarks.md qemu-config/README.md
        DESTINATION share/doc/vmcuda COMPONENT host)
install(FILES qemu-config/vmcuda-shmem.xml qemu-config/qemu-args.txt qemu-config/policy.toml
        DESTINATION share/doc/vmcuda/examples COMPONENT host)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(root \"\$ENV{DESTDIR}\")
  if(prefix STREQUAL \"/usr\")
    set(etc /etc)
    set(units /lib/systemd/system)
  else()
    set(etc \"\${prefix}/etc\")
    set(units \"\${prefix}/lib/systemd/system\")
  endif()
  # The unit runs the installed stub; the example domain the installed QEMU wrapper.
  file(READ \"${PROJECT_SOURCE_DIR}/qemu-config/vmcuda-stub@.service\" unit)
  string(REPLACE \"/usr/local/bin/vmcuda-stub\" \"\${prefix}/bin/vmcuda-stub\" unit \"\${unit}\")
  file(WRITE \"\${root}\${units}/vmcuda-stub@.service\" \"\${unit}\")
  file(READ \"${PROJECT_SOURCE_DIR}/qemu-config/example-domain.xml\" domain)
  string(REPLACE \"/usr/local/lib/vmcuda/\" \"\${prefix}/lib/vmcuda/\" domain \"\${domain}\")
  file(WRITE \"\${root}\${prefix}/share/doc/vmcuda/examples/example-domain.xml\" \"\${domain}\")
  # libvirt 6.5+ runs every hook in qemu.d: no clash with a hook of the administrator's own.
  # (file(INSTALL) puts DESTDIR in front itself; file(WRITE) is given it.)
  file(INSTALL \"${PROJECT_SOURCE_DIR}/qemu-config/libvirt-hook-qemu\" DESTINATION \"\${etc}/libvirt/hooks/qemu.d\"
       RENAME vmcuda
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  message(STATUS \"Installing: \${root}\${units}/vmcuda-stub@.service, \${root}\${etc}/libvirt/hooks/qemu.d/vmcuda\")
" COMPONENT host)
# Man pages from the programs' own --help (help2man), where it is installed.
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man_pages)
  foreach(entry "vmcuda-stub|8|$<TARGET_FILE:vmcuda-stub>|serves CUDA to virtual machines over shared memory"
                "vmcudactl|8|$<TARGET_FILE:vmcudactl>|controls running vmcuda stubs"
                "vmcuda-run|1|${CMAKE_BINARY_DIR}/host-stub/vmcuda-run|runs a CUDA program through vmcuda on this host")
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 0 name)
    list(GET entry 1 section)
    list(GET entry 2 program)
    list(GET entry 3 what)
    set(page ${CMAKE_BINARY_DIR}/man/${name}.${section})
    add_custom_command(OUTPUT ${page}
                       COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
                       COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=${section} --name=${what}
                               --output=${page} ${program}
                       DEPENDS ${program} VERBATIM)
    list(APPEND man_pages ${page})
    install(FILES ${page} DESTINATION share/man/man${section} COMPONENT host)
  endforeach()
  add_custom_target(man ALL DEPENDS ${man_pages})
  add_dependencies(man vmcuda-stub vmcudactl)
else()
  message(STATUS "vmcuda: help2man not found: no man pages (apt-get install help2man)")
endif()

# ---- guest
# libcuda.so.1 holds the implementation of all three (guest-lib/README.md); libcuda.so and
# libnvidia-ml.so are the links programs built with -lcuda / -lnvidia-ml name at link time, as
# NVIDIA's driver package ships them.
install(FILES $<TARGET_FILE:vmcuda_cudart> $<TARGET_FILE:vmcuda_cuda> ${CMAKE_BINARY_DIR}/guest-lib/libcuda.so
              $<TARGET_FILE:vmcuda_nvml> ${CMAKE_BINARY_DIR}/guest-lib/libnvidia-ml.so ${vmcuda_cublas_files}
        DESTINATION lib/vmcuda COMPONENT guest)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(prefix STREQUAL \"/usr\")
    set(etc /etc)
  else()
    set(etc \"\${prefix}/etc\")
  endif()
  file(WRITE \"\$ENV{DESTDIR}\${etc}/ld.so.conf.d/vmcuda.conf\"
       \"# vmcuda's libcudart.so.13: CUDA programs in this VM use the host's GPU (docs/running.md)\\n\${prefix}/lib/vmcuda\\n\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${etc}/ld.so.conf.d/vmcuda.conf (run ldconfig)\")
" COMPONENT guest)

# ---- dkms
set(dkms_src src/vmcuda-${VMCUDA_VERSION})
install(FILES ivshmem-driver/vmcuda_drv.c ivshmem-driver/Makefile ivshmem-driver/README.md
        DESTINATION ${dkms_src} COMPONENT dkms)
install(DIRECTORY ivshmem-driver/include DESTINATION ${dkms_src} COMPONENT dkms)
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/ivshmem-driver/dkms.conf\" dkms)
  string(REGEX REPLACE \"PACKAGE_VERSION=\\\"[^\\\"]*\\\"\" \"PACKAGE_VERSION=\\\"${VMCUDA_VERSION}\\\"\" dkms \"\${dkms}\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dkms_src}/dkms.conf\" \"\${dkms}\")
" COMPONENT dkms)
