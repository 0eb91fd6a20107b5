// Helpers the path interposers share: rewriting into the fake tree and opening device nodes.
#pragma once

#include <sys/stat.h>

#include <string>

#include "fs/fake_tree.h"

struct statx;

namespace rvgl::emu {

// Rewrites an emulated absolute path into the tree (building it on first use).
bool rewrite_path(const char *path, std::string &out);
// The node a rewritten path denotes (symlinks followed).
NodeRef node_at_rewritten(const std::string &real_path);
// Opens an emulated node: a new DeviceFile (or /dev/udmabuf) behind a new fd. -1 and errno.
int open_node(const NodeRef &node, const std::string &real_path, int flags);
// Makes a stat of a node file look like the character device it stands for.
void fake_node_stat(const NodeRef &node, struct stat &st);
void fake_node_statx(const NodeRef &node, struct statx &stx);
// The node behind an emulator fd, if it is a device fd.
NodeRef node_of_fd(int fd);
// Remembers that fd is a tree directory opened by its public name.
void track_tree_dir(int fd, const char *public_path);
// For an *at() call: the public absolute path of `rel` under dirfd when dirfd is a tree directory
// the emulator handed out; false otherwise.
bool resolve_at(int dirfd, const char *rel, std::string &public_path);
// Public name of a node ("/dev/dri/renderD128").
std::string node_public_path(const NodeRef &node);

}  // namespace rvgl::emu
