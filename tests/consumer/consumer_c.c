/* consumer_c.c - the smallest real use of maploc's C API: open, load on the CPU, hash one tensor, export it by DLPack. */
#include <maploc/maploc_c.h>

#include <stdio.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s (code %d)\n", what, maploc_last_error_message(), maploc_last_error_code());
  return 1;
}

int main(int argc, char** argv) {
  maploc_checkpoint* checkpoint = NULL;
  maploc_loaded* loaded = NULL;
  maploc_load_options options;
  DLManagedTensor* tensor = NULL;
  maploc_tensor_info info;
  size_t index = 0;
  char sha256[65];
  if (argc != 3) {
    fprintf(stderr, "usage: consumer_c CHECKPOINT TENSOR\n");
    return 2;
  }
  if (maploc_open(argv[1], &checkpoint) != MAPLOC_OK) return fail("open");
  maploc_load_options_init(&options);
  options.map_location = "cuda:*->cpu";
  if (maploc_load(checkpoint, &options, &loaded) != MAPLOC_OK) return fail("load");
  maploc_checkpoint_free(checkpoint);
  if (maploc_loaded_find(loaded, argv[2], &index) != MAPLOC_OK) return fail("find");
  if (maploc_loaded_tensor(loaded, index, &info) != MAPLOC_OK) return fail("tensor");
  if (maploc_loaded_tensor_sha256(loaded, index, sha256) != MAPLOC_OK) return fail("sha256");
  if (maploc_loaded_dlpack(loaded, index, &tensor) != MAPLOC_OK) return fail("dlpack");
  maploc_loaded_free(loaded);
  if (tensor->dl_tensor.data != info.data || tensor->dl_tensor.ndim != info.ndim) {
    fprintf(stderr, "the DLPack tensor is not the tensor maploc placed\n");
    return 1;
  }
  printf("maploc %s (C): %s %s, %d-d on device type %d\n", maploc_version(), argv[2], sha256,
         (int)tensor->dl_tensor.ndim, (int)tensor->dl_tensor.device.device_type);
  tensor->deleter(tensor);
  return 0;
}
