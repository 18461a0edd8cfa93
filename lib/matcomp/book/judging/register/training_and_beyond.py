"""The register's claims of the paper's §3.3 to §6 and its appendices (``matcomp.book.judging.register``): how training
gets to the shift (embeddings, components, the GPT), the model's sizes and inputs, the related work's remarks and
open questions (§5, App. E) and the paper's scope, in the paper's order."""

from __future__ import annotations

from matcomp.book.judging.register.claim import PaperClaim

CLAIMS: tuple[PaperClaim, ...] = (
    PaperClaim('token_norm_symmetric',
               'NeurIPS §3.3, Fig. 7(a) (WS §4, Fig. 4a)',
               'The ℓ2 norm of the token embeddings of values from -1.5 to 1.5 is symmetric with respect to 0 (it'
               ' depends on the magnitude, not the sign).',
               'embeddings',
               'measured on the page (symmetry error), not judged'),
    PaperClaim('token_pca_sign_magnitude',
               'NeurIPS §3.3, Fig. 7(b) (WS §4, Fig. 4b)',
               'The top-2 principal components of the token embeddings separate by the sign of the value (y-axis)'
               ' and vary continuously with its magnitude (x-axis).',
               'embeddings',
               'measured on the page (component correlations with sign and |x|), not judged'),
    PaperClaim('token_embeddings_before_drop',
               'NeurIPS §3.3, App. C, Fig. 9 (WS §4, App. F, Fig. 7)',
               'Token embeddings do not change abruptly: projected on the final (step 50,000) top-2 principal '
               'components they align closely with the final arrangement before the drop, as copying only needs '
               'the embedding-unembedding (WS: such components evolving beforehand may drive the shift).',
               'embeddings',
               "judged at the copy table's last step (the paper's 14,000 of its drop at 15,000, scaled to ours; on "
               "the paper's model, which ships no later plateau checkpoint, at its step 4,000), the picture's "
               "likeness as a correlation with a bound of the book's; the WS's driving force is not judged"),
    PaperClaim('position_column_clusters',
               'NeurIPS §3.3, Fig. 7(c) (WS §4, Fig. 4c)',
               'In the t-SNE projection of the post-shift positional embeddings, positions in the same column '
               'cluster together, although no marker tokens end a row or column.',
               'embeddings'),
    PaperClaim('position_clusters_after_drop',
               'NeurIPS §3.3, App. C, Fig. 10',
               'Unlike the token embeddings, the positional embeddings do not evolve continually: the column '
               'clustering appears only after the sudden drop.',
               'embeddings',
               'both halves judged: clustered after the drop, and not before, the latter a check of the method '
               '(untrained embeddings pass it too, −0.04 to −0.06); that the clustering does not evolve '
               'continually is shown as the silhouettes at every checkpoint, not judged'),
    PaperClaim('pre_shift_copies_without_attention_or_positions',
               "NeurIPS §3.3 'Positional Embeddings' (not in the workshop version)",
               '"This along with the evolution of attention heads (Sec. 3.1, 3.2) aligns with how the pre–shift model '
               'copies observed entries with little effect from ablating attention heads or positional embeddings '
               '(Sec. 3.2.1)."',
               'copying_phase',
               'the attention half is judged by the pre-shift uniform ablation; the positional-embeddings half is '
               'not: positions are permuted only in the post-shift model (the observed-entries page), which is '
               'what the cited §3.2.1 ablates'),
    PaperClaim('position_norm_dip',
               'WS §4, App. F, Fig. 8 (the workshop version alone)',
               'The ℓ2 norm of the positional embeddings is nearly constant across positions except for a drop at'
               ' positions around 21-26, most of the middle row of the 7×7 input, possibly marking an origin.',
               'embeddings'),
    PaperClaim('components_token_mlp_no_plateau',
               'NeurIPS §4 (a), Fig. 8',
               'Re-initialising one component and freezing the rest at their final values, the MLP layers and the'
               ' token embeddings converge without any observable plateau or sudden drop.',
               'components',
               "judged on its page, not among the key numbers: token and MLP 'no plateau', one seed"),
    PaperClaim('components_attention_position_plateau',
               'NeurIPS §4 (b), Fig. 8',
               "Trained alone, the attention layers and the positional embeddings show the full model's dynamics,"
               ' a plateau and then a sudden drop.',
               'components',
               "judged on its page, not among the key numbers: 'a plateau, then a sudden drop' for each, one seed"),
    PaperClaim('components_position_longest',
               'NeurIPS §4 (c), Fig. 8',
               'The positional embeddings show the longest plateau, their sudden drop coming just before step 40,000.',
               'components',
               'judged on its page, not among the key numbers: positions leave the plateau last, one seed'),
    PaperClaim('components_drop_before_full',
               'NeurIPS Fig. 8 caption',
               'Except for the positional embeddings, every component trained alone drops before the sudden drop '
               'of usual training.',
               'components',
               "not among its page's checks; the table shows each group's steps beside normal training's"),
    PaperClaim('drop_is_learning_attention',
               'NeurIPS §4, App. M.1',
               'Since the pre-shift model does not use attention and relies on other components to copy, the '
               'sudden drop corresponds in large part to learning the right attention patterns.',
               'components',
               'an interpretation; the copying-phase page reads its model switching against it, not judged'),
    PaperClaim('attention_maps_change_at_drop',
               'NeurIPS Abstract (b), §1, App. M.1, Fig. 22 (WS Abstract (ii), App. G, Fig. 9)',
               'The attention maps at steps 4,000, 14,000, 16,000 and 20,000 show the heads changing from no '
               'interpretable pattern to the task-relevant structure during the sudden drop.',
               'head_taxonomy',
               'shown as maps and family scores across training beside L_mask, not judged'),
    PaperClaim('gpt_drop_is_copying',
               'NeurIPS §4, App. G, Fig. 11',
               'A 2-layer, 2-head GPT trained by next-token cross-entropy on (masked 7×7 rank-2 matrix, [SEP], '
               'full matrix) also learns abruptly: its sudden loss drop is learning to copy the observed entries,'
               ' and it does not reach BERT-comparable performance at missing entries.',
               'gpt',
               'described on the page (onset, accuracies), not judged'),
    PaperClaim('gpt_attention_change',
               'NeurIPS App. G, Fig. 12',
               "The GPT's heads change suddenly from trivial (step 200: layer 2 attends to [SEP] from every "
               'output position) to layer-1 heads attending to the corresponding input position (step 600: '
               '~identity maps that copy).',
               'gpt',
               'shown as maps and a table of attention shares, not judged'),
    PaperClaim('gpt_could_match_bert',
               'NeurIPS App. G, Fig. 11 caption',
               '"While we could not achieve performance comparable to BERT for missing entries, we believe it should '
               'be possible with some modifications to the training setup."',
               'gpt',
               "a belief: the page sets the GPT's missing entries beside BERT's on the paper's training "
               'setup and tries no modification of it'),
    PaperClaim('width_effect',
               'NeurIPS §4, App. H, Fig. 13',
               'On 7×7 rank-2 inputs (MLP width 4d), width d = 64 is too small for accurate completion and d = '
               '128 is sub-optimal; wider models complete better.',
               'width_depth',
               'not judged: the claim is on the loss after 50,000 steps, and our runs stop a fixed number of steps '
               'after their drop; the page shows widest over narrowest L_mask there, seed by seed'),
    PaperClaim('depth_effect',
               'NeurIPS §4, App. H, Fig. 14',
               'Going from 4 to 6 layers moves the sudden drop earlier, 8 and 12 layers change little more, and '
               'the final MSE decreases from 4 up to 12 layers, though not significantly.',
               'width_depth',
               "compared on the page (earlier / later / within the seeds' spread), not judged by the book's rule"),
    PaperClaim('size_mixture_learning_order',
               'NeurIPS §4, App. I, Fig. 16',
               'Trained on a uniform mixture of 5×5, 7×7 and 9×9 rank-1 matrices (one size per step of 256), the '
               'model learns every size, its per-size test MSE showing a learning order (the caption states '
               'none).',
               'sizes_ranks',
               'no order stated to judge; drop order read over seeds on the page'),
    PaperClaim('ranks_12layer',
               'NeurIPS §4, App. I (WS App. B)',
               'A 12-layer, 12-head model trained separately on matrices of several ranks also solves them; WS: '
               'it reaches a total MSE of order 1e-3 on 7×7 r2, 10×10 r3, 12×12 r3 and 15×15 r4, and the 4-layer '
               'model (~4e-3) is comparable.',
               'sizes_ranks',
               'needs a 12-layer model on larger matrices (GPU); the page trains small sizes and ranks on the CPU'
               ' model'),
    PaperClaim('gaussian_training_drop',
               'NeurIPS §4, App. J.1, Fig. 18',
               'Training on i.i.d. N(0, 1) entries also shows the sudden drop, with a final loss of about 5.6e-3,'
               ' similar to the Unif[-1, 1] case.',
               'ood',
               'read seed by seed beside uniform twins on the page, not judged'),
    PaperClaim('ood_distributions_similar',
               "NeurIPS App. J.2 'Matrix Distribution'",
               "At inference on Gaussian and Laplace entries (256 samples, 7×7 rank 2) the trained model's MSE is"
               ' similar to that on the training (uniform) distribution.',
               'ood',
               "described on the page (relative and absolute L_mask), not judged: no number of the paper's to set "
               'beside ours'),
    PaperClaim('ood_close_to_nuclear_norm',
               'NeurIPS App. J.2, Fig. 19(a), (b)',
               "Out of distribution in rank and in the number of rows, the model's performance is close to "
               "nuclear-norm minimisation's on the same inputs.",
               'ood',
               'judged on its page for the rows panel only, on one model; the rank panel is read on a rank-1 model'),
    PaperClaim('ood_columns_break',
               'NeurIPS App. J.2, Fig. 19(c)',
               "Changing the number of columns adversely affects the model's performance, unlike nuclear-norm "
               "minimisation, since the positional embeddings depend on an element's column.",
               'ood',
               'described on the page (misses where nuclear-norm minimisation completes), not judged'),
    PaperClaim('larger_input_heads_similar',
               'NeurIPS App. N (WS App. L, Figs. 12-14; WS App. B)',
               'The attention heads of 12-layer, 12-head models on 7×7 rank-2, 12×12 rank-3 and 15×15 rank-4 '
               'inputs are similar to those of the smaller 4-layer model.',
               None,
               'needs 12-layer models on larger inputs; no chapter'),
    PaperClaim('novelty_interpretability',
               'NeurIPS §5, App. E (WS App. K: the first quotation)',
               'Of transformers trained on linear-algebra tasks: "to the best of our knowledge, interpretability '
               'studies for such tasks have not been conducted before"; of the sudden jumps in accuracy such '
               'training shows: "they do not analyze why such a sudden jump occurs during optimization."',
               None,
               'a statement about the literature, not a finding about the model'),
    PaperClaim('online_setting_distinct',
               'NeurIPS §5, App. E (WS App. K: the first quotation)',
               'Of earlier work on sudden drops in MLM: "We also note that their work is not in the online training '
               'setting; our setup is online in the sense of sampling new data at every step of training." Of '
               'learning addition as matrix completion: "ours is a completely different setup, where the sudden drop'
               ' happens with the number of training steps with each step consisting of 256 low-rank matrices, each '
               'with a fixed fraction of observed entries."',
               'task',
               'a statement of the setting, not a finding: every run of the book draws fresh matrices at each step, '
               'as the task page builds them, and its drops come with training steps'),
    PaperClaim('implicit_optimisation_open',
               'NeurIPS §5, App. E (WS App. K: the first quotation)',
               '"Whether our model learns to implicitly ‘implement’ an optimization procedure as shown in some of '
               'these is an open question." "However, whether the framework of layer-wise in-context gradient '
               'descent can also be used in our setup is a plausible and open direction for future work."',
               None,
               'an open question: no chapter looks for an optimisation procedure carried out layer by '
               'layer; the nuclear-norm page rules out two objectives only (§3.2), and the probing page reads what '
               'each layer holds, not how one layer updates it'),
    PaperClaim('plateau_length_not_suddenness',
               'NeurIPS App. E (not in the workshop version)',
               'Of Hoffmann et al., who "claim that the softmax function in Attention leads to longer training loss '
               'plateaus – however, reducing the length of plateau does not explain why the drop in loss is sudden '
               'and sharp when it occurs."',
               'shortening',
               'a remark on related work; the shortening chapter, which shortens the plateau, goes '
               'beyond the paper'),
    PaperClaim('why_sudden_open',
               'NeurIPS §6 (WS §5)',
               'Why the shift occurs suddenly rather than gradually, and a mathematical characterisation of the '
               'algorithm for missing entries, are left for future work.',
               'progress',
               'an open question; the progress chapter goes beyond the paper'),
    PaperClaim('scope_small_matrices',
               'NeurIPS §6',
               'All experiments use small matrices (the largest 15×15), the method would likely need '
               'modifications to scale, and it is not advocated as a replacement for efficient matrix-completion '
               'solvers.',
               None,
               'a statement of scope, not a finding'),
)
