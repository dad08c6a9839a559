"""Images in; masks, CSV and reports out."""

from segdiff_gui.io.images import IMAGE_SUFFIXES, collect_images, read_image

__all__ = ["IMAGE_SUFFIXES", "collect_images", "read_image"]
