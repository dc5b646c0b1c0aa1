// Read-only file mappings (POSIX mmap) and mapped safetensors files.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/read_file.h"
#include "warpdecode/error.h"
#include "warpdecode/model/safetensors.h"

namespace wd::model {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // Refused before it is opened: opening a FIFO blocks until a writer comes.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    throw FormatError("cannot read '" + path + "': not a regular file");
  const OpenedFile f(path);
  if (!S_ISREG(f.stat().st_mode)) throw f.error("not a regular file");
  size_ = size_t(f.stat().st_size);
  if (size_ > 0) {  // mmap of 0 bytes fails; an empty file maps to nothing
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f.fd(), 0);
    if (p == MAP_FAILED) throw f.error(std::string("cannot map it: ") + std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
  }
}  // f closes the descriptor: the mapping keeps the file

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::release(const uint8_t* p, size_t n) const {
  if (!data_ || p < data_ || p + n > data_ + size_ || n == 0) return;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (uintptr_t(p) + page - 1) / page * page;  // whole pages inside the range
  const uintptr_t hi = (uintptr_t(p) + n) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // advisory: errors ignored
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : map_(std::make_unique<MappedFile>(path)) {
  static const uint8_t kEmpty[1] = {0};
  header_ = parse_safetensors_header(map_->data() ? map_->data() : kEmpty, map_->size(), path);
}

}  // namespace wd::model
