"""The code ``tiny-kimi-k2.5``'s folder carries, as text the recipe writes there
(:mod:`driftcheck.models.tiny_kimi`): transformers has no ``kimi_k25`` model type, so the folder
has its own configuration module (``auto_map`` names it) and the image processor vLLM's
Kimi-K2.5 processing asks for (every image or video chunk becomes one fixed grid of patches).
Both are driftcheck's own, and nothing here is imported by driftcheck.
"""

CONFIG_MODULE = '''\
"""Kimi-K2.5's configuration as transformers reads it from this folder (``auto_map``): a
wrapper config with a text and a vision sub-config. Written for driftcheck's tiny model."""

from transformers import PretrainedConfig


class KimiK25TextConfig(PretrainedConfig):
    model_type = "kimi_k2"


class KimiK25VisionConfig(PretrainedConfig):
    model_type = "kimi_k25_vision"


class KimiK25Config(PretrainedConfig):
    model_type = "kimi_k25"
    sub_configs = {"text_config": KimiK25TextConfig, "vision_config": KimiK25VisionConfig}

    def __init__(self, text_config=None, vision_config=None, **kwargs):
        if not isinstance(text_config, PretrainedConfig):
            text_config = KimiK25TextConfig(**(text_config or {}))
        if not isinstance(vision_config, PretrainedConfig):
            vision_config = KimiK25VisionConfig(**(vision_config or {}))
        self.text_config = text_config
        self.vision_config = vision_config
        super().__init__(**kwargs)
'''

PROCESSOR_MODULE = '''\
"""A tiny image processor with the methods vLLM's Kimi-K2.5 processing calls: every image or
video chunk is resized to one fixed grid of patches. Written for driftcheck's tiny model."""

import numpy as np
import torch
from transformers.image_processing_utils import BaseImageProcessor


class TinyKimiImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values", "grid_thws"]

    def __init__(self, patch_size=14, grid=4, merge_kernel_size=(2, 2), num_frames_per_chunk=4,
                 **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.grid = grid
        self.merge_kernel_size = list(merge_kernel_size)
        self.num_frames_per_chunk = num_frames_per_chunk

    def _frames(self, chunk):
        if chunk["type"] == "image":
            return [chunk["image"]]
        return list(chunk["video_chunk"])

    def media_tokens_calculator(self, chunk):
        kh, kw = self.merge_kernel_size
        return (self.grid // kh) * (self.grid // kw)

    def _patches(self, frame):
        side = self.patch_size * self.grid
        img = frame.convert("RGB").resize((side, side))
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 127.5 - 1.0)
        x = x.permute(2, 0, 1)
        p, g = self.patch_size, self.grid
        x = x.reshape(3, g, p, g, p).permute(1, 3, 0, 2, 4)
        return x.reshape(g * g, 3, p, p)

    def preprocess(self, vision_chunks, **kwargs):
        pixels, grids = [], []
        for chunk in vision_chunks:
            frames = self._frames(chunk)
            pixels += [self._patches(f) for f in frames]
            grids.append([len(frames), self.grid, self.grid])
        return {"pixel_values": torch.cat(pixels), "grid_thws": torch.tensor(grids)}

    def split_video_chunks(self, video):
        n = self.num_frames_per_chunk
        frames = list(video)
        return [
            {"type": "video_chunk", "video_chunk": frames[i : i + n]}
            for i in range(0, len(frames), n)
        ]
'''

PROCESSOR_CONFIG = {
    "auto_map": {"AutoImageProcessor": "image_processing_tiny_kimi.TinyKimiImageProcessor"},
    "image_processor_type": "TinyKimiImageProcessor",
    "patch_size": 14,
    "grid": 4,
    "merge_kernel_size": [2, 2],
    "num_frames_per_chunk": 4,
    # What vLLM's own Kimi-K2.5 vision processor reads from 0.2x on
    # (vllm/transformers_utils/processors/kimi_k25_vision_fused.py), sized for the tiny tower.
    "media_proc_cfg": {
        "patch_size": 14,
        "merge_kernel_size": [2, 2],
        "temporal_merge_kernel_size": 4,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "in_patch_limit": 16,
        "patch_limit_on_one_side": 4,
        "in_patch_limit_each_frame": 16,
        "in_patch_limit_video": 64,
        "fixed_output_tokens": None,
    },
}
