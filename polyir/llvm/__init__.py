"""IR -> LLVM IR lowering shared by the CPU and NVPTX backends (see ``lower``)."""
