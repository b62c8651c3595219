//! The next batch on its way in: staged while a step runs, then made the
//! network's input and its labels the loss's.

use super::Executor;
use crate::core::backend::Backend;
use crate::core::error::Result;

impl<B: Backend> Executor<B> {
    /// Sets the next steps' batch: the images (NHWC f32, the graph's input
    /// shape) and one label per image for the loss ([`Executor::stage_batch`]
    /// then [`Executor::take_batch`]).
    pub fn set_batch(&mut self, images: &[f32], labels: &[u32]) -> Result<()> {
        self.stage_batch(images, labels)?;
        self.take_batch()
    }

    /// Starts moving a batch towards the device (the images as NHWC f32
    /// of the graph's input shape, one label per image for the loss) and
    /// returns: on a GPU its copy overlaps the step run next, and
    /// [`Executor::take_batch`] makes it the input before the step after.
    pub fn stage_batch(&mut self, images: &[f32], labels: &[u32]) -> Result<()> {
        let want = self.batch * self.graph.nodes[0].out.len();
        if images.len() != want {
            return Err(crate::core::error::Error::invalid(
                "set batch",
                format!("{} image values for a batch needing {want}", images.len()),
            ));
        }
        let stage = match &mut self.stage {
            Some(s) => s,
            None => {
                let s = self
                    .backend
                    .alloc_stage(self.buffer_dims(0), self.elem(0))?;
                self.stage.insert(s)
            }
        };
        if labels.len() != self.batch {
            return Err(crate::core::error::Error::invalid(
                "set batch",
                format!("{} labels for a batch of {}", labels.len(), self.batch),
            ));
        }
        self.backend.stage(stage, images)?;
        self.staged_labels.clear();
        self.staged_labels.extend_from_slice(labels);
        self.staged = true;
        Ok(())
    }

    /// Makes the staged batch the network's input and its labels the
    /// loss's; returns once the images are in place.
    pub fn take_batch(&mut self) -> Result<()> {
        let stage = match (&mut self.stage, self.staged) {
            (Some(s), true) => s,
            _ => {
                return Err(crate::core::error::Error::invalid(
                    "set batch",
                    "no batch was staged".into(),
                ))
            }
        };
        // The labels first: a label the loss refuses leaves the input as
        // it was.
        let mut taken = false;
        for layer in self.layers.iter_mut().flatten() {
            taken |= layer.set_labels(&mut self.cx, &self.staged_labels)?;
        }
        if !taken {
            return Err(crate::core::error::Error::invalid(
                "set batch",
                "the graph has no loss layer to take labels".into(),
            ));
        }
        let buf = self.acts[self.act_of[0]]
            .as_mut()
            .expect("the input's buffer is held");
        self.backend.unstage(stage, buf)?;
        self.staged = false;
        Ok(())
    }
}
