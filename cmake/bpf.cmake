# Placeholder until the bpf probe lands: always the stub.
add_library(gt_bpf STATIC core/bpf/bpfprobe_stub.c)
target_include_directories(gt_bpf PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/core)
target_link_libraries(gt_plain PUBLIC gt_bpf)
