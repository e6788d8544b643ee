// gradus/image.hpp — umbrella for gd::image (tf.image): PNG and JPEG codecs, sample types,
// resizing, projective transforms, crops/pads/flips, colour adjustments, bounding boxes,
// training-time augmentation, and drawing (text labels). Not included by gradus/gradus.hpp: it needs libpng and libjpeg
// (link gradus::io).
#pragma once
#include "gradus/image/bbox.hpp"
#include "gradus/image/color.hpp"
#include "gradus/image/decode.hpp"
#include "gradus/image/draw.hpp"
#include "gradus/image/dtype.hpp"
#include "gradus/image/geometry.hpp"
#include "gradus/image/jpeg.hpp"
#include "gradus/image/png.hpp"
#include "gradus/image/preprocess.hpp"
#include "gradus/image/resize.hpp"
#include "gradus/image/transform.hpp"
