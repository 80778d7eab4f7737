/* nocuda.h -- included by config.h when NVFP4_NO_CUDA is defined (host-only
** builds of the library sources, such as the libFuzzer target): the CUDA
** backend and NCCL are left out whatever configure found.  A separate file
** because config.status rewrites every #undef line of config.h.in. */
#undef HAVE_CUDA
#undef HAVE_NCCL
