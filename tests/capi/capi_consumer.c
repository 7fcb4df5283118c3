/* capi_consumer.c - the C API used from C: open, list, plan, load, export every tensor by DLPack, free the
 * checkpoint and the loaded handle, then read every exported tensor (their storages must still be alive:
 * run under ASan in the sanitizer build). Prints "tensor NAME SHA256" (values walked row-major through
 * the DLPack strides) or "refused NAME CODE"; check_capi.cmake compares them with torch's manifest.
 * Also the object tree (maploc_checkpoint_object: walked to its end, tensor indices and back-references in
 * range, the same from maploc_open_memory), storages by DLPack and error code names.
 * Usage: maploc_capi_consumer CHECKPOINT view|copy */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <maploc/maploc_c.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s (last error %d: %s)\n", __FILE__, \
              __LINE__, #cond, maploc_last_error_code(), maploc_last_error_message()); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* SHA-256 of the values a host DLPack tensor describes, row-major, as hex into out[65]. */
static void dlpack_sha256(const DLTensor* t, char* out) {
  const size_t size = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int64_t numel = 1, index[64] = {0};
  unsigned char digest[32];
  unsigned int digest_size = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  CHECK(t->ndim <= 64 && ctx != NULL);
  CHECK(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1);
  for (int d = 0; d < t->ndim; ++d) numel *= t->shape[d];
  for (int64_t n = 0; n < numel; ++n) {
    int64_t at = 0;
    for (int d = 0; d < t->ndim; ++d) at += index[d] * t->strides[d];
    CHECK(EVP_DigestUpdate(ctx, (const char*)t->data + t->byte_offset + at * (int64_t)size, size) == 1);
    for (int d = t->ndim - 1; d >= 0 && ++index[d] == t->shape[d]; --d) index[d] = 0;
  }
  CHECK(EVP_DigestFinal_ex(ctx, digest, &digest_size) == 1 && digest_size == 32);
  EVP_MD_CTX_free(ctx);
  for (int i = 0; i < 32; ++i) sprintf(out + 2 * i, "%02x", digest[i]);
}

/* Errors come back as codes with a message; nothing aborts. */
static void check_errors(const char* path) {
  maploc_checkpoint* c = NULL;
  maploc_loaded* l = NULL;
  maploc_tensor_info info;
  maploc_load_options o;
  size_t index = 0;
  CHECK(maploc_open("/nonexistent/model.pt", &c) == 1 && c == NULL); /* kIoOpen */
  CHECK(strstr(maploc_last_error_message(), "/nonexistent/model.pt") != NULL);
  CHECK(maploc_open(NULL, &c) == MAPLOC_E_INVALID_ARGUMENT);
  CHECK(maploc_checkpoint_tensor(NULL, 0, &info) == MAPLOC_E_INVALID_ARGUMENT);
  CHECK(maploc_open(path, &c) == MAPLOC_OK);
  CHECK(maploc_checkpoint_tensor(c, maploc_checkpoint_tensor_count(c), &info) == MAPLOC_E_INVALID_ARGUMENT);
  maploc_load_options_init(&o);
  o.map_location = "cuda:*->nowhere";
  CHECK(maploc_load(c, &o, &l) == 403 && l == NULL); /* kRemapBadSpec, naming the item */
  CHECK(strstr(maploc_last_error_message(), "nowhere") != NULL);
  o.map_location = "cpu";
  o.host = 7;
  CHECK(maploc_load(c, &o, &l) == MAPLOC_E_INVALID_ARGUMENT);
  o.host = MAPLOC_HOST_VIEW;
  CHECK(maploc_load(c, &o, &l) == MAPLOC_OK);
  CHECK(maploc_loaded_find(l, "no such tensor", &index) == MAPLOC_E_INVALID_ARGUMENT);
  CHECK(maploc_loaded_to(l, "cuda:99", NULL) != MAPLOC_OK);
  CHECK(maploc_loaded_to(l, "not a device", NULL) != MAPLOC_OK);
  maploc_loaded_free(l);
  maploc_checkpoint_free(c);
  maploc_loaded_free(NULL);
  maploc_checkpoint_free(NULL);
  maploc_dlpack_free(NULL);
}

/* Walks one value of the object tree (docs/capi.md), returns the position after it. */
static size_t tree_value(const uint8_t* b, size_t size, size_t at, size_t tensors, uint32_t* ids) {
  uint8_t tag;
  uint32_t n, i;
  CHECK(at < size);
  tag = b[at++];
  if (tag & 0x80) ++*ids;
  tag &= 0x7F;
#define U32(x)                \
  do {                        \
    CHECK(at + 4 <= size);    \
    memcpy(&(x), b + at, 4);  \
    at += 4;                  \
  } while (0)
  switch (tag) {
    case 'N': case 'T': case 'F': return at;
    case 'i': case 'f': CHECK(at + 8 <= size); return at + 8;
    case 'I': case 's': case 'b': case 'a': U32(n); CHECK(at + n <= size); return at + n;
    case 'X': U32(n); CHECK(n < tensors); return at;
    case 'R': U32(n); CHECK(n < *ids); return at;
    case 'G': U32(n); at += n; U32(n); CHECK(at + n <= size); return at + n;
    case 'P': return tree_value(b, size, at, tensors, ids);
    case 't': case 'l': case 'S': case 'Z':
      U32(n);
      for (i = 0; i < n; ++i) at = tree_value(b, size, at, tensors, ids);
      return at;
    case 'd':
      U32(n);
      for (i = 0; i < 2 * n; ++i) at = tree_value(b, size, at, tensors, ids);
      return at;
    case 'C':
      CHECK(at < size && b[at] <= 4);
      ++at;
      for (i = 0; i < 3; ++i) at = tree_value(b, size, at, tensors, ids); /* callable, args, kwargs */
      U32(n);
      for (i = 0; i < n; ++i) at = tree_value(b, size, at, tensors, ids);
      U32(n);
      for (i = 0; i < 2 * n; ++i) at = tree_value(b, size, at, tensors, ids);
      U32(n);
      for (i = 0; i < n; ++i) at = tree_value(b, size, at, tensors, ids);
      return at;
    default: CHECK(!"an unknown tag in the object tree"); return size;
  }
#undef U32
}

static void check_object_tree(const char* path) {
  maploc_checkpoint *c = NULL, *m = NULL, *bad = NULL;
  maploc_loaded* l = NULL;
  uint8_t *tree = NULL, *tree_m = NULL;
  size_t size = 0, size_m = 0, i, file_size;
  uint32_t ids = 0;
  char* bytes;
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL && fseek(f, 0, SEEK_END) == 0);
  file_size = (size_t)ftell(f);
  bytes = malloc(file_size + 1);
  CHECK(bytes != NULL && fseek(f, 0, SEEK_SET) == 0 && fread(bytes, 1, file_size, f) == file_size);
  fclose(f);
  CHECK(maploc_open(path, &c) == MAPLOC_OK);
  CHECK(maploc_checkpoint_object(c, &tree, &size) == MAPLOC_OK && tree != NULL && size > 0);
  CHECK(tree_value(tree, size, 0, maploc_checkpoint_tensor_count(c), &ids) == size);
  CHECK(maploc_open_memory(bytes, file_size, path, &m) == MAPLOC_OK);
  free(bytes); /* the checkpoint keeps its own copy */
  CHECK(maploc_checkpoint_object(m, &tree_m, &size_m) == MAPLOC_OK);
  CHECK(size_m == size && memcmp(tree, tree_m, size) == 0);
  maploc_buffer_free(tree);
  maploc_buffer_free(tree_m);
  CHECK(maploc_open_memory("not a checkpoint", 16, NULL, &bad) == 300 && bad == NULL);
  CHECK(strcmp(maploc_error_code_name(300), "kTorchNotCheckpoint") == 0);
  CHECK(strcmp(maploc_error_code_name(MAPLOC_E_INTERNAL), "kInternal") == 0);
  CHECK(maploc_load(m, NULL, &l) == MAPLOC_OK || maploc_last_error_code() / 100 == 4); /* cuda tags: no GPU */
  maploc_checkpoint_free(m);
  maploc_checkpoint_free(c);
  if (l == NULL) return;
  for (i = 0; i < maploc_loaded_storage_count(l); ++i) {
    maploc_storage_info s;
    DLManagedTensor* t = NULL;
    CHECK(maploc_loaded_storage(l, i, &s) == MAPLOC_OK);
    if (strcmp(s.device, "cpu") != 0) continue;
    CHECK(maploc_loaded_storage_dlpack(l, i, &t) == MAPLOC_OK && t != NULL);
    CHECK(t->dl_tensor.ndim == 1 && t->dl_tensor.shape[0] == (int64_t)s.nbytes && t->dl_tensor.strides != NULL &&
          t->dl_tensor.strides[0] == 1 && t->dl_tensor.dtype.code == kDLUInt && t->dl_tensor.dtype.bits == 8);
    CHECK(t->dl_tensor.data == s.data);
    maploc_dlpack_free(t);
  }
  CHECK(maploc_loaded_storage_dlpack(l, maploc_loaded_storage_count(l), NULL) == MAPLOC_E_INVALID_ARGUMENT);
  maploc_loaded_free(l);
}

/* maploc_*_tensor_extra, _component, _attribute: every tensor described; components and attributes in range,
 * a composite's components tensors of the list, quantized tensors with a qscheme. */
static void check_tensor_extra(const char* path) {
  maploc_checkpoint* c = NULL;
  size_t i, k, n;
  CHECK(maploc_open(path, &c) == MAPLOC_OK);
  n = maploc_checkpoint_tensor_count(c);
  for (i = 0; i < n; ++i) {
    maploc_tensor_info info;
    maploc_tensor_extra e;
    const char *a = NULL, *b = NULL;
    size_t part = 0;
    CHECK(maploc_checkpoint_tensor(c, i, &info) == MAPLOC_OK);
    CHECK(maploc_checkpoint_tensor_extra(c, i, &e) == MAPLOC_OK);
    CHECK(e.subclass != NULL && e.qscheme != NULL && e.device != NULL && e.held_by < (int64_t)n);
    CHECK((strcmp(info.kind, "quantized") == 0) == (e.qscheme[0] != '\0'));
    for (k = 0; k < e.component_count; ++k) {
      CHECK(maploc_checkpoint_tensor_component(c, i, k, &a, &part) == MAPLOC_OK && a != NULL && part < n);
    }
    for (k = 0; k < e.attribute_count; ++k) {
      CHECK(maploc_checkpoint_tensor_attribute(c, i, k, &a, &b) == MAPLOC_OK && a != NULL && b != NULL);
    }
    CHECK(maploc_checkpoint_tensor_component(c, i, e.component_count, &a, &part) == MAPLOC_E_INVALID_ARGUMENT);
    CHECK(maploc_checkpoint_tensor_attribute(c, i, e.attribute_count, &a, &b) == MAPLOC_E_INVALID_ARGUMENT);
  }
  CHECK(maploc_checkpoint_tensor_extra(c, n, NULL) == MAPLOC_E_INVALID_ARGUMENT);
  maploc_checkpoint_free(c);
}

int main(int argc, char** argv) {
  maploc_checkpoint* c = NULL;
  maploc_plan* plan = NULL;
  maploc_loaded* l = NULL;
  maploc_load_options o;
  DLManagedTensor** kept;
  char** names;
  size_t n, i;
  if (argc != 3) {
    fprintf(stderr, "usage: maploc_capi_consumer CHECKPOINT view|copy\n");
    return 2;
  }
  check_errors(argv[1]);
  check_object_tree(argv[1]);
  check_tensor_extra(argv[1]);
  CHECK(maploc_open(argv[1], &c) == MAPLOC_OK);
  n = maploc_checkpoint_tensor_count(c);
  printf("maploc %s: %s, %zu tensors, %zu storages\n", maploc_version(), maploc_checkpoint_format(c), n,
         maploc_checkpoint_storage_count(c));

  CHECK(maploc_plan_make(c, "cpu", &plan) == MAPLOC_OK);
  for (i = 0; i < maploc_checkpoint_storage_count(c); ++i) CHECK(strcmp(maploc_plan_target(plan, i), "cpu") == 0);
  CHECK(maploc_plan_target(plan, maploc_checkpoint_storage_count(c)) == NULL);
  CHECK(maploc_plan_check_fits(plan) == MAPLOC_OK);
  maploc_plan_free(plan);

  maploc_load_options_init(&o);
  o.map_location = "cpu";
  o.host = strcmp(argv[2], "copy") == 0 ? MAPLOC_HOST_COPY : MAPLOC_HOST_VIEW;
  CHECK(maploc_load(c, &o, &l) == MAPLOC_OK);
  maploc_checkpoint_free(c); /* the loaded checkpoint stands alone */
  CHECK(maploc_loaded_tensor_count(l) == n);

  kept = calloc(n, sizeof *kept);
  names = calloc(n, sizeof *names);
  CHECK(kept != NULL && names != NULL);
  for (i = 0; i < n; ++i) {
    maploc_tensor_info info;
    size_t found = n;
    int rc;
    CHECK(maploc_loaded_tensor(l, i, &info) == MAPLOC_OK);
    names[i] = strdup(info.name);
    CHECK(maploc_loaded_find(l, info.name, &found) == MAPLOC_OK && found == i);
    rc = maploc_loaded_dlpack(l, i, &kept[i]);
    if (rc != MAPLOC_OK) {
      CHECK(rc == MAPLOC_E_NOT_CONVERTIBLE && kept[i] == NULL);
      CHECK(strstr(maploc_last_error_message(), info.name) != NULL);
      printf("refused %s %d\n", info.name, rc);
      continue;
    }
    /* Zero-copy: the DLPack view starts where maploc says the tensor's first element is. */
    CHECK((char*)kept[i]->dl_tensor.data + kept[i]->dl_tensor.byte_offset == (char*)info.data);
    CHECK(kept[i]->dl_tensor.device.device_type == kDLCPU && strcmp(info.device, "cpu") == 0);
    CHECK(kept[i]->dl_tensor.ndim == info.ndim);
  }
  maploc_loaded_free(l); /* every storage now lives on in the exported tensors only */

  for (i = 0; i < n; ++i) {
    char sha[65];
    if (kept[i] == NULL) continue;
    dlpack_sha256(&kept[i]->dl_tensor, sha);
    printf("tensor %s %s\n", names[i], sha);
    maploc_dlpack_free(kept[i]);
  }
  for (i = 0; i < n; ++i) free(names[i]);
  free(names);
  free(kept);
  return 0;
}
