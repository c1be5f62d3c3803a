"""How an ``RGBImageField`` stores one image: the values of the ``mode``
of its record, shared by the field (which writes them) and the decoders
(which read them)."""

JPEG_MODE = 0
"""Record ``mode``: the stored bytes are a JPEG file."""
RAW_MODE = 1
"""Record ``mode``: the stored bytes are height x width x 3 RGB pixels, row-major."""
YUV420_MODE = 2
"""Record ``mode``: the stored bytes are the image's planar YCbCr 4:2:0
planes (``slipstream.native.planes_bytes`` of them): Y, then Cb and Cr at
half the height and width, rounded up."""
