"""Memories in and out of a store as files: the export format and its atomic writer, the import
formats and their strict reader, the write-path rules for imported rows, the folders files may
be in, and the backup folder's manifest."""
